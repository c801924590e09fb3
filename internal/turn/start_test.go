package turn_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// TestStartKeepsNoGoroutinePerStep: steps started with Runner.Start keep
// only their calls' goroutines while the calls run; a step waiting for its
// calls on a goroutine of its own (Run on a goroutine per step) keeps two
// per step, and a goroutine's record is about half a KiB of heap for good.
func TestStartKeepsNoGoroutinePerStep(t *testing.T) {
	const n = 200
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	wait := newTool(t, "wait", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
		started.Done()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return tool.Result{Content: "ok"}, nil
	})
	em := &fakeEmitter{}
	r := &turn.Runner{Assembler: turn.NewAssembler(category("", wait)), Emitter: em, State: newState(), Cancels: turn.NewCancels()}
	parent, stop := context.WithCancel(context.Background())
	defer stop()
	before := runtime.NumGoroutine()
	var done sync.WaitGroup
	done.Add(n)
	errs := make(chan error, n)
	for i := range n {
		st := &protocol.Step{AgentID: "a1", TurnID: fmt.Sprintf("t%d", i), Context: protocol.Context{Kind: protocol.KindText},
			Calls: []protocol.CallItem{call(fmt.Sprintf("c%d", i), "wait", `{}`)}}
		r.Start(parent, st, func(err error) { errs <- err; done.Done() })
	}
	started.Wait()
	during := runtime.NumGoroutine() - before
	close(release)
	done.Wait()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d goroutines for %d steps in flight", during, n)
	if during > n+n/10 {
		t.Errorf("%d goroutines for %d started steps of one call each: a step waits on a goroutine of its own", during, n)
	}
	em.mu.Lock()
	defer em.mu.Unlock()
	if len(em.done) != n || len(em.outputs) != n {
		t.Fatalf("%d step.done and %d call.output for %d steps", len(em.done), len(em.outputs), n)
	}
}

// TestStartDeafToolHoldsNoStep: a started step whose tool ignores its
// context ends once the call's time limit and grace pass, while the tool
// still runs; the tool's goroutine alone stays until it returns, and then
// nothing of the step is left.
func TestStartDeafToolHoldsNoStep(t *testing.T) {
	stuck := make(chan struct{})
	returned := make(chan struct{})
	deaf := newTool(t, "deaf", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
		defer close(returned)
		<-stuck // ignores its context
		return tool.Result{Content: "late"}, nil
	}, withTimeout(20*time.Millisecond))
	quick := newTool(t, "quick", tool.Sequential, reply("ok"))
	em := &fakeEmitter{}
	r := &turn.Runner{Assembler: turn.NewAssembler(category("", deaf, quick)), Emitter: em, State: newState(), Cancels: turn.NewCancels()}
	before := runtime.NumGoroutine()
	done := make(chan error, 1)
	// A group, then a sequential call after it: the step goes on past the
	// deaf call's group without it.
	r.Start(context.Background(), step(1, call("c1", "deaf", ``), call("c2", "quick", ``)), func(err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		close(stuck)
		t.Fatal("a tool that ignores its context held its started step")
	}
	c1, c2 := em.output("c1"), em.output("c2")
	em.mu.Lock()
	dones := len(em.done)
	em.mu.Unlock()
	if dones != 1 || c1 == nil || c1.Error == nil || c1.Error.Kind != tool.Timeout || c2 == nil || c2.Status != "ok" {
		close(stuck)
		t.Fatalf("%d step.done, c1 %+v, c2 %+v: want one, c1 timed out, c2 run", dones, c1, c2)
	}
	close(stuck)
	<-returned
	for deadline := time.Now().Add(waitLimit); runtime.NumGoroutine() > before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after the step and its tool ended, %d before", runtime.NumGoroutine(), before)
		}
	}
}

// cancelMarkFails is a State whose cancel mark cannot be read.
type cancelMarkFails struct{ *fakeState }

func (cancelMarkFails) Cancelled(context.Context, string, string) (bool, string, error) {
	return false, "", errors.New("state unavailable")
}

// TestStartFailsBeforeDispatch: a started step that fails before its
// calls are dispatched (its turn's state unreadable) tells done at once,
// and leaves nothing tracked: a cancel of its turn finds no step.
func TestStartFailsBeforeDispatch(t *testing.T) {
	cancels := turn.NewCancels()
	r := &turn.Runner{Assembler: turn.NewAssembler(category("", newTool(t, "quick", tool.Parallel, reply("ok")))),
		Emitter: &fakeEmitter{}, State: cancelMarkFails{newState()}, Cancels: cancels}
	var got error
	called := false
	r.Start(context.Background(), step(1, call("c1", "quick", ``)), func(err error) { got, called = err, true })
	if !called || got == nil {
		t.Fatalf("done called %v with %v, want at once with the state's error", called, got)
	}
	if n := cancels.Cancel("a1", "t1", "test"); n != 0 {
		t.Fatalf("%d steps still tracked after the step failed", n)
	}
}

// TestDispatcherStartGroups: a started step runs its groups in order
// without a goroutine waiting for them, a group larger than MaxParallel
// included (that one is waited for on a goroutine of its own), and done
// gets every call's outcome, in call order.
func TestDispatcherStartGroups(t *testing.T) {
	var running, most atomic.Int32
	par := newTool(t, "par", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		running.Add(-1)
		return tool.Result{Content: "p"}, nil
	})
	seq := newTool(t, "seq", tool.Sequential, reply("s"))
	d := &turn.Dispatcher{MaxParallel: 2, Goroutines: turn.NewGoroutines(4)}
	set := mustSet(t, par, seq)
	var calls []protocol.CallItem
	for i := range 5 { // a bounded group of 5
		calls = append(calls, call(fmt.Sprintf("a%d", i), "par", ``))
	}
	calls = append(calls, call("s1", "seq", ``), call("b0", "par", ``), call("b1", "par", ``), call("s2", "seq", ``))
	got := make(chan *turn.StepResult, 1)
	d.Start(context.Background(), set, input(calls...), func(res *turn.StepResult) { got <- res })
	var res *turn.StepResult
	select {
	case res = <-got:
	case <-time.After(waitLimit):
		t.Fatal("the started step never ended")
	}
	if len(res.Outcomes) != len(calls) {
		t.Fatalf("%d outcomes for %d calls", len(res.Outcomes), len(calls))
	}
	for i, o := range res.Outcomes {
		want := "p"
		if calls[i].Name == "seq" {
			want = "s"
		}
		if o.CallID != calls[i].CallID || o.Err != nil || output(t, o) != want {
			t.Fatalf("outcome %d: %s %v %q, want %s %q", i, o.CallID, o.Err, output(t, o), calls[i].CallID, want)
		}
	}
	if m := most.Load(); m > 2 {
		t.Fatalf("%d calls ran at once, over MaxParallel 2", m)
	}
}
