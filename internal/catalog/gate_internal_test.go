package catalog

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The gate's bounds and turns, one grant at a time: per key, in total,
// the waiting bound, a cancelled waiter handing its slot on, and keys
// taking turns while one has a flood waiting.
func TestKeyGateBoundsAndTurns(t *testing.T) {
	g := newKeyGate(Limits{PerKey: 2, Total: 3, Waiting: 2})
	ctx := context.Background()
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	a1, err := g.acquire(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	a2, err := g.acquire(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.acquire(short(), "A"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third of A with PerKey 2: %v", err)
	}
	b1, err := g.acquire(ctx, "B") // A waits at its own bound only: B gets the free slot
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.acquire(short(), "C"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a fourth with Total 3: %v", err)
	}
	// A's flood: two wait (its Waiting bound), a third is refused.
	got := make(chan string, 10)
	wait := func(key string) {
		go func() {
			rel, err := g.acquire(ctx, key)
			if err != nil {
				got <- "err " + key
				return
			}
			got <- key
			time.Sleep(5 * time.Millisecond)
			rel()
		}()
	}
	wait("A")
	wait("A")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		n := len(g.keys["A"].queue)
		g.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("A's two waiters never queued")
		}
	}
	if _, err := g.acquire(ctx, "A"); !errors.Is(err, errBusy) {
		t.Fatalf("A past its waiting bound: %v", err)
	}
	wait("C")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		n := len(g.turns)
		g.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("C never queued")
		}
	}
	// B's slot frees: A is at its bound, so C (waiting behind A's turn) takes it.
	b1()
	if k := <-got; k != "C" {
		t.Fatalf("after B's release %s was granted, want C", k)
	}
	a1()
	a2()
	for range 2 {
		if k := <-got; k != "A" {
			t.Fatalf("granted %s, want A", k)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		all, running, keys := g.all, g.running, len(g.keys)
		g.mu.Unlock()
		if all == 0 && running == 0 && keys == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left over: %d in the gate, %d running, %d keys", all, running, keys)
		}
	}
}
