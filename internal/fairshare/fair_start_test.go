package fairshare

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/protocol"
)

// TestFairStartHoldsNoWorker: with Start, a step in flight holds a slot
// but none of the intake's goroutines: Concurrency steps run at once on at
// most maxStartServers goroutines, even when each takes a while to start,
// the next steps wait for a slot, and a step's done frees its slot and
// settles its message.
func TestFairStartHoldsNoWorker(t *testing.T) {
	r := newFairRig(t, 1)
	const concurrency, steps = 100, 200
	var mu sync.Mutex
	var dones []func(error)
	f := r.fair(r.js, concurrency, concurrency, nil)
	f.Handler = nil
	f.Start = func(ctx context.Context, msg jetstream.Msg, done func(error)) {
		time.Sleep(20 * time.Millisecond) // starting takes a while
		mu.Lock()
		dones = append(dones, done)
		mu.Unlock()
	}
	stop := r.run(f)
	defer stop()
	// On a failure, the steps started are done before the intake stops
	// (it waits for them).
	called := 0
	defer func() {
		mu.Lock()
		rest := dones[called:]
		mu.Unlock()
		for _, done := range rest {
			done(nil)
		}
	}()
	r.publish("a1", "", 0, steps)
	started := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(dones)
	}
	for deadline := time.Now().Add(time.Minute); started() < concurrency; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d steps started, want %d", started(), concurrency)
		}
	}
	// No step beyond the slots starts, however long the others run.
	time.Sleep(200 * time.Millisecond)
	if n := started(); n != concurrency {
		t.Fatalf("%d steps started with %d slots", n, concurrency)
	}
	f.mu.Lock()
	servers := f.servers
	f.mu.Unlock()
	if servers > maxStartServers {
		t.Fatalf("%d goroutines started %d steps in flight: at most %d should", servers, concurrency, maxStartServers)
	}
	// Each done frees a slot: the rest start, and all are settled.
	for i := 0; i < steps; i++ {
		for deadline := time.Now().Add(time.Minute); started() <= i; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d steps started after %d were done, want %d", started(), i, steps)
			}
		}
		mu.Lock()
		done := dones[i]
		mu.Unlock()
		done(nil)
		called++
	}
	cons, err := r.js.Consumer(context.Background(), protocol.StreamCalls, protocol.ConsumerCalls)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		info, err := cons.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending == 0 && info.NumPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d steps unacknowledged, %d pending after every done", info.NumAckPending, info.NumPending)
		}
	}
}
