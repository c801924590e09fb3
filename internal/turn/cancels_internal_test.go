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
		if _, ok := c.running[c.hash(turnKey{"a1", "t1"})]; ok || len(c.running) != 1 {
			t.Fatalf("order %v: %d turns left, want the other turn only", order, len(c.running))
		}
		other.release()
		if len(c.running) != 0 {
			t.Fatalf("order %v: %d turns left", order, len(c.running))
		}
	}
}

// Turns whose keys share a hash share a list in Cancels: a cancel reaches
// its own turn's steps only, and each release leaves the other's.
func TestCancelsSharedHash(t *testing.T) {
	c := NewCancels()
	a, b := turnKey{"a1", "t1"}, turnKey{"a2", "t2"}
	const h = 42
	sa, ea := c.trackAt(context.Background(), a, h, 3)
	sb, eb := c.trackAt(context.Background(), b, h, 3)
	if n := c.Cancel("a1", "t2", ""); n != 0 {
		t.Fatalf("Cancel of a turn not running found %d steps", n)
	}
	if c.CancelStep("a2", "t1", 3, "x") {
		t.Fatal("CancelStep of a turn not running found a step")
	}
	// Cancel and CancelStep look the turn up by its own hash: a turn's
	// steps tracked under another hash are out of their reach, which
	// says the lookups use the hash.
	c.running[c.hash(b)], c.running[c.hash(a)] = c.running[h], c.running[h]
	if n := c.Cancel("a2", "t2", "x"); n != 1 {
		t.Fatalf("Cancel found %d steps of the turn, want 1", n)
	}
	if sb.Err() == nil || sa.Err() != nil {
		t.Fatalf("turn b %v, turn a %v; want turn b ended only", sb.Err(), sa.Err())
	}
	if !c.CancelStep("a1", "t1", 3, "x") || sa.Err() == nil {
		t.Fatal("CancelStep missed the step of its turn")
	}
	delete(c.running, c.hash(a))
	delete(c.running, c.hash(b))
	eb.release()
	if c.running[h] != ea || ea.next != nil || ea.prev != nil {
		t.Fatal("the release of one turn's step left the other's out of their list")
	}
	ea.release()
	if len(c.running) != 0 {
		t.Fatalf("%d lists left", len(c.running))
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
