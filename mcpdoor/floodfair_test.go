package mcpdoor

import (
	"context"
	"testing"
	"time"
)

// queued waits until principal name has n requests waiting in g.
func queued(t *testing.T, g *fairGate, name string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		g.mu.Lock()
		q := g.waiting[name]
		got := 0
		if q != nil {
			got = len(q.waiters)
		}
		g.mu.Unlock()
		if got == n {
			return
		}
	}
	t.Fatalf("%s: %d requests never queued", name, n)
}

// A principal with one request waiting gets the next free slot, however
// many requests another principal queued before it.
func TestFairGateServesPrincipalsInTurn(t *testing.T) {
	g := newFairGate(1)
	ctx := context.Background()
	if !g.acquire(ctx, "noisy", time.Second) {
		t.Fatal("a free slot was not given")
	}
	order := make(chan string, 8)
	wait := func(name string) {
		go func() {
			if g.acquire(ctx, name, time.Minute) {
				order <- name
			}
		}()
	}
	for i := range 4 {
		wait("noisy")
		queued(t, g, "noisy", i+1)
	}
	wait("quiet")
	queued(t, g, "quiet", 1)

	var got []string
	holder := "noisy"
	for range 5 {
		g.release(holder)
		holder = <-order
		got = append(got, holder)
	}
	if got[0] != "noisy" || got[1] != "quiet" {
		t.Fatalf("grants in the order %v: the quiet principal waited behind the noisy one's queue", got)
	}
	g.release(holder)
	if g.free != 1 || len(g.held) != 0 || len(g.ring) != 0 || len(g.waiting) != 0 {
		t.Fatalf("after every release: free %d, held %v, ring %d, waiting %v", g.free, g.held, len(g.ring), g.waiting)
	}
}

// While another principal has a request in the door, a principal holds
// no more than its share of the slots, even with slots free.
func TestFairGateKeepsAShareForOthers(t *testing.T) {
	g := newFairGate(2)
	ctx := context.Background()
	g.enter("noisy")
	g.enter("noisy")
	g.enter("quiet")
	if !g.acquire(ctx, "noisy", time.Second) {
		t.Fatal("a free slot was not given")
	}
	if g.acquire(ctx, "noisy", 20*time.Millisecond) {
		t.Fatal("the noisy principal took a second slot while the quiet one has a request in the door")
	}
	if !g.acquire(ctx, "quiet", time.Second) {
		t.Fatal("the quiet principal's share was not kept")
	}
	g.release("quiet")
	g.leave("quiet")
	// Alone, a principal may take every slot.
	if !g.acquire(ctx, "noisy", time.Second) {
		t.Fatal("alone, the noisy principal did not get the free slot")
	}
	g.release("noisy")
	g.release("noisy")
	g.leave("noisy")
	g.leave("noisy")
	if g.free != 2 || len(g.held) != 0 || len(g.active) != 0 {
		t.Fatalf("after every release: free %d, held %v, active %v", g.free, g.held, g.active)
	}
}

// A request that gives up waiting leaves no slot behind, also when the
// slot came as it gave up.
func TestFairGateGivingUpLeaksNoSlot(t *testing.T) {
	g := newFairGate(1)
	ctx, cancel := context.WithCancel(context.Background())
	if !g.acquire(ctx, "a", time.Second) {
		t.Fatal("a free slot was not given")
	}
	res := make(chan bool)
	go func() { res <- g.acquire(ctx, "b", time.Minute) }()
	queued(t, g, "b", 1)
	cancel()
	if <-res {
		t.Fatal("a cancelled request got a slot")
	}
	g.release("a")
	if g.free != 1 || len(g.held) != 0 || len(g.waiting) != 0 || len(g.ring) != 0 {
		t.Fatalf("free %d, held %v, waiting %v", g.free, g.held, g.waiting)
	}
	for range 200 { // grants racing give-ups
		if !g.acquire(context.Background(), "a", time.Second) {
			t.Fatal("a free slot was not given")
		}
		go func() { res <- g.acquire(context.Background(), "b", time.Microsecond) }()
		g.release("a")
		if <-res {
			g.release("b")
		}
	}
	if g.free != 1 || len(g.held) != 0 || len(g.waiting) != 0 || len(g.ring) != 0 {
		t.Fatalf("after the races: free %d, held %v, waiting %v", g.free, g.held, g.waiting)
	}
}
