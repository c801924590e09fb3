package turn_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/agentbull/toolruntime/internal/heaptest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// quietEmitter publishes nothing and keeps nothing: what a step in flight
// keeps is the runtime's own.
type quietEmitter struct{}

func (quietEmitter) CallOutput(context.Context, *protocol.CallOutput) error { return nil }
func (quietEmitter) StepDone(context.Context, *protocol.StepDone) error     { return nil }
func (quietEmitter) Activity(string, string, protocol.Activity)             {}

// TestStepInFlightHeap bounds the heap a one-call step keeps while its
// tool waits on its context and reports progress, as bench/inflight's
// calls do (issue 39: thousands of calls in flight at once). What a step
// keeps of its own beyond its records and its two goroutines (the
// step's, the call's) is small: the step's context is no child of the one
// it came with (no entry in the worker's map of children, and no map of
// its own for the registrations on it) and is made only when something
// asks for its Done channel or its cause (lazyCancel, in the step's
// stepEntry with its observer and hooks), the worker's Cancels keys its
// steps by a hash of their turn, a reporting call's reporter does not
// copy the call's identity twice, and the step's deadline is a place in
// its Dispatcher's queue, not a timer; the step's observer is its entry,
// and the reporter's and the deadline queue's times are durations (8
// bytes where a time.Time is 24). Measured (amd64, with and without
// -race alike, the goroutines' records not counted): 2,187 B per step;
// 2,486 B with an Outcome's rare fields in the call's cell (its step's
// allocation in the 480-byte size class, not 384); 2,584 B with the observer apart in the entry and the times as
// time.Time;
// 2,670 B with a context.WithCancelCause per step, the observer and its
// hooks allocated apart and Cancels keyed by the two ids; 2,930 B when
// the dispatcher registers on the step's context instead of
// Input.Aborts; 3,180 B with the step's context a child of the worker's,
// its own timer and the larger reporter.
func TestStepInFlightHeap(t *testing.T) {
	const n = 2000
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	wait := newTool(t, "wait", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
		tool.ReportProgress(ctx, 1, 2, "waiting")
		started.Done()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return tool.Result{Content: "ok"}, nil
	})
	r := &turn.Runner{
		Assembler: turn.NewAssembler(category("", wait)),
		Emitter:   quietEmitter{},
		State:     newState(),
		Cancels:   turn.NewCancels(),
	}
	// The worker's context, which can end: every step comes with it.
	parent, stop := context.WithCancel(context.Background())
	defer stop()
	steps := make([]*protocol.Step, n)
	for i := range steps {
		steps[i] = &protocol.Step{AgentID: "a1", TurnID: fmt.Sprintf("t%d", i), Context: protocol.Context{Kind: protocol.KindText},
			Calls: []protocol.CallItem{call(fmt.Sprintf("c%d", i), "wait", `{}`)}}
	}
	heaptest.WarmGoroutines(2 * n) // the steps' and their calls'
	var done sync.WaitGroup
	errs := make([]error, n)
	before := heaptest.LiveHeap()
	for i, st := range steps {
		done.Go(func() { errs[i] = r.Run(parent, st) })
	}
	started.Wait()
	after := heaptest.LiveHeap()
	close(release)
	done.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	per := float64(after-before) / n
	t.Logf("%.0f B of heap per one-call step in flight", per)
	if per > 2304 {
		t.Errorf("a one-call step in flight keeps %.0f B of heap, over 2,304: something it keeps per step grew (its context made, its registrations, its timer, its times?)", per)
	}
}
