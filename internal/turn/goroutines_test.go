package turn_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/tool"
)

// TestGoroutines: calls run on kept goroutines, at most keep of them
// stay, and a hung tool keeps only its own goroutine from the others.
func TestGoroutines(t *testing.T) {
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	deaf := newTool(t, "deaf", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
		<-stuck // ignores its context
		return tool.Result{}, nil
	}, withTimeout(20*time.Millisecond))
	quick := newTool(t, "quick", tool.Parallel, reply("ok"))
	pool := turn.NewGoroutines(2)
	d := &turn.Dispatcher{Goroutines: pool}
	// settled waits until the pool has live goroutines, idle of them:
	// a goroutine goes idle (or ends) after its call's outcome is
	// reported, so after the step has returned.
	settled := func(idle, live int) {
		t.Helper()
		for deadline := time.Now().Add(waitLimit); pool.Idle() != idle || pool.Live() != live; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d idle goroutines of %d, want %d of %d", pool.Idle(), pool.Live(), idle, live)
			}
		}
	}
	five := input(call("c1", "together", ``), call("c2", "together", ``), call("c3", "together", ``), call("c4", "together", ``), call("c5", "together", ``))
	for range 3 {
		// The five wait for each other, so they run at once, on five
		// goroutines.
		set := mustSet(t, newTool(t, "together", tool.Parallel, atBarrier(newBarrier(5), "ok")))
		for _, o := range dispatch(t, context.Background(), d, set, five).Outcomes {
			if o.Err != nil || output(t, o) != "ok" {
				t.Fatalf("call %s: %v", o.CallID, o.Err)
			}
		}
		settled(2, 2) // two are kept, three end
	}
	// Two hung tools take both kept goroutines; the next step still runs,
	// on a new one.
	set := mustSet(t, quick, deaf)
	res := dispatch(t, context.Background(), d, set, input(call("c1", "deaf", ``), call("c2", "deaf", ``)))
	for _, o := range res.Outcomes {
		if kind(o) != tool.Timeout {
			t.Fatalf("call %s: %v, want a timeout", o.CallID, o.Err)
		}
	}
	settled(0, 2)
	if o := dispatch(t, context.Background(), d, set, input(call("c1", "quick", ``))).Outcomes[0]; o.Err != nil {
		t.Fatalf("after the hung calls: %v", o.Err)
	}
	settled(1, 3)
}
