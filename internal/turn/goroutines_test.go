package turn_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/internal/turn"
)

// TestGoroutines: calls run on kept goroutines, at most keep of them
// stay, and a hung tool keeps only its own goroutine from the others.
func TestGoroutines(t *testing.T) {
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	set := mustSet(t,
		newTool(t, "quick", tools.Parallel, reply("ok")),
		newTool(t, "deaf", tools.Parallel, func(context.Context, textArgs) (tools.Result, error) {
			<-stuck // ignores its context
			return tools.Result{}, nil
		}, withTimeout(20*time.Millisecond)),
	)
	pool := turn.NewGoroutines(2)
	d := &turn.Dispatcher{Goroutines: pool}
	idle := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(waitLimit); pool.Idle() != want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d idle goroutines, want %d", pool.Idle(), want)
			}
		}
	}
	five := input(call("c1", "quick", ``), call("c2", "quick", ``), call("c3", "quick", ``), call("c4", "quick", ``), call("c5", "quick", ``))
	for range 3 {
		for _, o := range dispatch(t, context.Background(), d, set, five).Outcomes {
			if o.Err != nil || output(t, o) != "ok" {
				t.Fatalf("call %s: %v", o.CallID, o.Err)
			}
		}
		idle(2) // five ran at once; two are kept
	}
	// Two hung tools hold both kept goroutines; the next step still runs.
	res := dispatch(t, context.Background(), d, set, input(call("c1", "deaf", ``), call("c2", "deaf", ``)))
	for _, o := range res.Outcomes {
		if kind(o) != tools.Timeout {
			t.Fatalf("call %s: %v, want a timeout", o.CallID, o.Err)
		}
	}
	idle(0)
	if o := dispatch(t, context.Background(), d, set, input(call("c1", "quick", ``))).Outcomes[0]; o.Err != nil {
		t.Fatalf("after the hung calls: %v", o.Err)
	}
	idle(1)
}
