package turn

import (
	"context"
	"testing"
)

// A turn's steps are a list: each release takes out its own step, in any
// order, a second release changes nothing, and the last one leaves no
// entry behind.
func TestCancelsList(t *testing.T) {
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {1, 2, 0}, {0, 2, 1}, {2, 0, 1}} {
		c := NewCancels()
		var ctxs []context.Context
		var releases []func()
		for range 3 {
			ctx, e := c.track(context.Background(), "a1", "t1", 0)
			ctxs, releases = append(ctxs, ctx), append(releases, e.release)
		}
		_, other := c.track(context.Background(), "a1", "t2", 0)
		left := 3
		for _, i := range order {
			releases[i]()
			releases[i]()
			left--
			if ctxs[i].Err() == nil {
				t.Fatalf("order %v: step %d released, its context not ended", order, i)
			}
			if n := c.Cancel("a1", "t1", ""); n != left {
				t.Fatalf("order %v: %d steps cancelled after %d were released, want %d", order, n, 3-left, left)
			}
		}
		if _, ok := c.running[turnKey{"a1", "t1"}]; ok || len(c.running) != 1 {
			t.Fatalf("order %v: %d turns left, want the other turn only", order, len(c.running))
		}
		other.release()
		if len(c.running) != 0 {
			t.Fatalf("order %v: %d turns left", order, len(c.running))
		}
	}
}

// CancelStep ends the one step's context and no other of the turn.
func TestCancelStep(t *testing.T) {
	c := NewCancels()
	s3, r3 := c.track(context.Background(), "a1", "t1", 3)
	defer r3.release()
	s4, r4 := c.track(context.Background(), "a1", "t1", 4)
	defer r4.release()
	if c.CancelStep("a1", "t1", 5, "x") {
		t.Fatal("a step not running was found")
	}
	if !c.CancelStep("a1", "t1", 4, "x") {
		t.Fatal("step 4 not found")
	}
	if s4.Err() == nil || s3.Err() != nil {
		t.Fatalf("step 4 %v, step 3 %v; want step 4 ended only", s4.Err(), s3.Err())
	}
}
