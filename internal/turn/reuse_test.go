package turn_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// TestStepStateReuse: a dispatcher reuses a step's records for the steps
// after it, never what outlives the step. The outcomes of earlier steps
// keep their values, and a context a tool kept (with its progress
// reporter) stays its call's: cancelled, with its identity, its reports
// dropped, while later steps run in the records it ran in.
func TestStepStateReuse(t *testing.T) {
	type kept struct {
		ctx  context.Context
		call string
	}
	var mu sync.Mutex
	var all []kept
	echo := newTool(t, "echo", tool.Parallel, func(ctx context.Context, p textArgs) (tool.Result, error) {
		c, _ := tool.CallFrom(ctx)
		mu.Lock()
		all = append(all, kept{ctx, c.CallID})
		mu.Unlock()
		go func() { // a report once the call ended, while later steps run
			<-ctx.Done()
			tool.ReportProgress(ctx, 1, 2, "late")
		}()
		return tool.Result{Content: p.Text}, nil
	})
	set := mustSet(t, echo)
	var published sync.Map // call id -> true
	hooks := &turn.Hooks{Progress: func(ref turn.JournalRef, _ protocol.Activity) { published.Store(ref.CallID, true) }}
	d := &turn.Dispatcher{Goroutines: turn.NewGoroutines(4)}
	var results []*turn.StepResult
	const steps, calls = 50, 6
	for s := range steps {
		in := turn.Input{AgentID: "a", TurnID: "t", Step: int64(s), Hooks: hooks}
		for i := range calls {
			in.Calls = append(in.Calls, call(fmt.Sprintf("s%dc%d", s, i), "echo", fmt.Sprintf(`{"text":"out %d %d"}`, s, i)))
		}
		results = append(results, d.Run(context.Background(), set, in))
	}
	for s, res := range results {
		for i, o := range res.Outcomes {
			id := fmt.Sprintf("s%dc%d", s, i)
			want := fmt.Sprintf(`{"type":"function_call_output","call_id":%q,"output":"out %d %d"}`, id, s, i)
			if o.CallID != id || string(o.Item) != want || o.Err != nil {
				t.Fatalf("step %d call %d: %s %s %v, want %s", s, i, o.CallID, o.Item, o.Err, want)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(all) != steps*calls {
		t.Fatalf("%d calls ran, want %d", len(all), steps*calls)
	}
	for _, k := range all {
		select {
		case <-k.ctx.Done():
		case <-time.After(waitLimit):
			t.Fatalf("the context of %s is open after its step", k.call)
		}
		if !errors.Is(context.Cause(k.ctx), context.Canceled) {
			t.Fatalf("the context of %s: cause %v", k.call, context.Cause(k.ctx))
		}
		if c, ok := tool.CallFrom(k.ctx); !ok || c.CallID != k.call {
			t.Fatalf("the context of %s says it is %v", k.call, c)
		}
		tool.ReportProgress(k.ctx, 2, 2, "later still")
	}
	time.Sleep(2 * turn.ProgressInterval) // a report that went through would be out by now
	published.Range(func(id, _ any) bool {
		t.Errorf("progress of %s published after its call ended", id)
		return true
	})
}
