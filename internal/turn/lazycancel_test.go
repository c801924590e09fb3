package turn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/tool"
)

// TestCallContextLookedAtLate: a call's context is made only when a tool
// looks at it (lazyCancel); one looked at only after the call ended,
// after its time ran out, or after the turn's abort is as cancelled as
// one watched from the start, with the same cause, and a child derived
// from it ends with it.
func TestCallContextLookedAtLate(t *testing.T) {
	t.Run("after the call ended", func(t *testing.T) {
		late := make(chan context.Context, 1)
		noop := newTool(t, "noop", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
			late <- ctx
			return tool.Result{Content: "ok"}, nil
		})
		res := (&turn.Dispatcher{}).Run(context.Background(), mustSet(t, noop), input(call("c1", "noop", `{}`)))
		if res.Outcomes[0].Err != nil {
			t.Fatal(res.Outcomes[0].Err)
		}
		ctx := <-late
		select { // cancelled just after the outcome is reported
		case <-ctx.Done():
		case <-time.After(waitLimit):
			t.Fatal("Done is open after the call ended")
		}
		if !errors.Is(ctx.Err(), context.Canceled) || !errors.Is(context.Cause(ctx), context.Canceled) {
			t.Fatalf("err %v, cause %v, want canceled", ctx.Err(), context.Cause(ctx))
		}
		if c, ok := tool.CallFrom(ctx); !ok || c.CallID != "c1" {
			t.Fatalf("CallFrom %v %v", c, ok)
		}
	})
	t.Run("after its time ran out", func(t *testing.T) {
		slow := newTool(t, "slow", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
			time.Sleep(120 * time.Millisecond) // past the limit, not looking
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return tool.Result{}, errors.New("not expired: " + errString(ctx.Err()))
			}
			child, cancel := context.WithCancel(ctx)
			defer cancel()
			<-child.Done() // already ended with its parent
			return tool.Result{Content: "late"}, ctx.Err()
		}, withTimeout(30*time.Millisecond))
		res := (&turn.Dispatcher{}).Run(context.Background(), mustSet(t, slow), input(call("c1", "slow", `{}`)))
		if o := res.Outcomes[0]; o.Err == nil || o.Err.Kind != tool.Timeout {
			t.Fatalf("outcome %+v, want a timeout", o.Err)
		}
	})
	t.Run("a child before the turn's abort", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		started := make(chan struct{})
		watch := newTool(t, "watch", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
			child, stop := context.WithCancel(ctx)
			defer stop()
			close(started)
			select {
			case <-child.Done():
				return tool.Result{}, context.Cause(child)
			case <-time.After(waitLimit):
				return tool.Result{}, errors.New("the child never ended")
			}
		})
		go func() {
			<-started
			cancel(turn.ErrCancelled)
		}()
		res := (&turn.Dispatcher{}).Run(ctx, mustSet(t, watch), input(call("c1", "watch", `{}`)))
		if o := res.Outcomes[0]; o.Err == nil || o.Err.Kind != tool.Aborted {
			t.Fatalf("outcome %+v, want aborted", o.Err)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
