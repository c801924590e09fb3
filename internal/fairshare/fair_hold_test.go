package fairshare

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/protocol"
)

// burnCPU spins for d of this goroutine's time: a handler bound by CPU,
// not by slots.
func burnCPU(d time.Duration) func(string) error {
	return func(string) error {
		end := time.Now().Add(d)
		for x := 0; time.Now().Before(end); x++ {
			_ = x * x
		}
		return nil
	}
}

// Two keys of weights 1 and 3, both flooding, on one worker, with calls
// bound by slots and with calls bound by CPU (more slots than cores):
// while both have steps waiting, the handlers start in a 1:3 ratio. The
// steps are held by the intake, so both keys always have steps queued and
// the stride order is exact; the margin only absorbs the first slots.
func TestFairSharesExactOnOneWorker(t *testing.T) {
	for _, tc := range []struct {
		name        string
		concurrency int
		do          func(string) error
	}{{"slots", 4, sleepy(2 * time.Millisecond)}, {"cpu", 32, burnCPU(time.Millisecond)}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFairRig(t, 1)
			const n = 400
			for range n / 10 {
				r.publish("agent-a", "tenant-a", 1, 10)
				r.publish("agent-b", "tenant-b", 3, 10)
			}
			stop := r.run(r.fair(r.js, tc.concurrency, 0, tc.do))
			defer stop()
			r.waitHandled(2 * n)
			var a, b, bDone int
			for i, s := range r.order() {
				isB := strings.HasPrefix(s, "tenant-b/")
				if isB {
					bDone++
				}
				if n-bDone < 20 {
					break
				}
				if i < tc.concurrency {
					continue // the first slots fill before both keys are queued
				}
				if isB {
					b++
				} else {
					a++
				}
			}
			share := float64(b) / float64(a+b)
			t.Logf("tenant-b (weight 3) got %.3f of %d steps", share, a+b)
			if share < 0.70 || share > 0.80 {
				t.Fatalf("tenant-b got %.3f of the steps (a=%d b=%d); want 0.75 ± 0.05", share, a, b)
			}
		})
	}
}

// A step held by the intake longer than the ack wait keeps its lease:
// with a 1 s ack wait and one slot, the last of 8 steps of 400 ms waits
// about 3 s, and still every step is handled once.
func TestFairHeldStepsKeepTheirLease(t *testing.T) {
	r := newFairRig(t, 1)
	r.topo.AckWait = time.Second
	ctx := context.Background()
	if _, err := r.js.UpdateConsumer(ctx, protocol.StreamCalls, jetstream.ConsumerConfig{
		Durable: protocol.ConsumerCalls, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait: time.Second, MaxDeliver: r.topo.MaxDeliver, MaxAckPending: r.topo.MaxAckPending, MemoryStorage: true,
	}); err != nil {
		t.Fatal(err)
	}
	r.publish("slow", "", 0, 8)
	stop := r.run(r.fair(r.js, 1, 0, sleepy(400*time.Millisecond)))
	r.waitHandled(8)
	// A redelivery would come after another ack wait.
	time.Sleep(1500 * time.Millisecond)
	stop()
	r.order()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.handled) != 8 {
		t.Fatalf("%d handler runs for 8 steps: %v", len(r.handled), r.handled)
	}
}

// Steps held when the worker stops are handed back at once (not after the
// ack wait) and a worker started next runs each of them once.
func TestFairStopHandsBackHeldSteps(t *testing.T) {
	r := newFairRig(t, 1)
	r.publish("hog", "", 0, 30)
	stop := r.run(r.fair(r.js, 1, 0, sleepy(50*time.Millisecond)))
	waitCount(t, r, 3)
	stop()
	start := time.Now()
	stop = r.run(r.fair(r.js, 4, 0, sleepy(time.Millisecond)))
	defer stop()
	r.waitHandled(30)
	r.order() // each once
	// The ack wait is 5 s: handed back, they came at once.
	if waited := time.Since(start); waited > 4*time.Second {
		t.Logf("the second worker took %s (a loaded machine?)", waited)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.handled) != 30 {
		t.Fatalf("%d handler runs for 30 steps", len(r.handled))
	}
}

// Past the hold budget the intake spills to TURN_BACKLOG; the steps come
// back from there in order, each once, and nothing is left behind.
func TestFairSpillsPastTheHoldBudget(t *testing.T) {
	r := newFairRig(t, 1)
	r.publish("hog", "", 0, 60)
	f := r.fair(r.js, 2, 0, sleepy(5*time.Millisecond))
	f.HoldSteps = 4
	var spilled atomic.Int64
	inner := f.Handler
	f.Handler = func(ctx context.Context, msg jetstream.Msg) error {
		if _, ok := msg.(backlogMsg); ok {
			spilled.Add(1)
		}
		return inner(ctx, msg)
	}
	stop := r.run(f)
	defer stop()
	r.waitHandled(60)
	if spilled.Load() == 0 {
		t.Fatal("no step came from the backlog with a hold budget of 4")
	}
	last := -1
	for _, s := range r.order() {
		var i int
		for _, c := range strings.TrimPrefix(s, "hog/") {
			i = i*10 + int(c-'0')
		}
		if i < last-2 {
			t.Fatalf("step %d handled after %d", i, last)
		}
		last = max(last, i)
	}
	waitEmpty(t, r)
}

// A spilled step's deliveries before the spill count against MaxDeliver:
// one that had 4 of 5 fails once from the backlog and is dead-lettered
// then, under its own subject, not delivered 5 times more.
func TestFairSpilledDeliveriesCountOn(t *testing.T) {
	r := newFairRig(t, 1)
	ctx := context.Background()
	subject := protocol.Subject(protocol.PrefixCall, "flaky", "flaky-0")
	m := nats.NewMsg(BacklogSubject(KindCall, "flaky"))
	m.Data = []byte(`{"agent_id":"flaky","turn_id":"flaky-0","step":0,"context":{"kind":"text"},"output":[]}`)
	m.Header.Set(bus.HeaderSubject, subject)
	m.Header.Set(HeaderWeight, "1")
	m.Header.Set(HeaderDelivered, "4")
	if _, err := r.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	stop := r.run(r.fair(r.js, 2, 0, func(string) error { return errors.New("always fails") }))
	defer stop()
	dead, err := r.js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var got *jetstream.RawStreamMsg
	for got == nil {
		got, _ = dead.GetLastMsgForSubject(ctx, protocol.Subject(protocol.PrefixDead, "flaky", "flaky-0"))
		if got == nil && time.Now().After(deadline) {
			t.Fatal("the step was never dead-lettered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(got.Header.Get("Dead-Reason"), "delivery limit") {
		t.Errorf("reason %q", got.Header.Get("Dead-Reason"))
	}
	r.mu.Lock()
	n := r.times[subject]
	r.mu.Unlock()
	if n != 1 {
		t.Fatalf("handled %d times; 4 deliveries before the spill leave 1 of 5", n)
	}
	waitEmpty(t, r)
}

// waitEmpty waits until TURN_CALLS and TURN_BACKLOG hold nothing.
func waitEmpty(t *testing.T, r *fairRig) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		calls, _ := r.js.Stream(ctx, protocol.StreamCalls)
		backlog, _ := r.js.Stream(ctx, bus.StreamBacklog)
		ci, _ := calls.Info(ctx)
		bi, _ := backlog.Info(ctx)
		if ci.State.Msgs == 0 && bi.State.Msgs == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind: %d in TURN_CALLS, %d in TURN_BACKLOG", ci.State.Msgs, bi.State.Msgs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
