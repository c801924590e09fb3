package bus

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// TestHandledMessageNotKept: while a handler runs (a step's calls can run
// for minutes), the consumer keeps only what settling the step needs, not
// the message: a handler that lets go of its message sees it collected.
// The step is then settled as before: acknowledged, or, for a dead
// letter, copied whole from the stream, where it stays until settled.
func TestHandledMessageNotKept(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	topo := Topology{Storage: jetstream.MemoryStorage, RetryDelay: 10 * time.Millisecond}.WithDefaults()
	if err := Setup(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	pub := &Publisher{JS: js}
	body := []byte(`{"not":"a step"}`)
	for _, turn := range []string{"t1", "t2"} {
		m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, "a", turn))
		m.Header.Set("X-Trace", "abc")
		m.Data = body
		if err := pub.publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	var collected, handled atomic.Int32
	c := &Consumer{
		JS: js, Stream: protocol.StreamCalls, Durable: protocol.ConsumerCalls, Dead: &DeadLetters{JS: js, Pub: pub},
		Handler: func(ctx context.Context, msg jetstream.Msg) error {
			dead := msg.Subject() == protocol.Subject(protocol.PrefixCall, "a", "t2")
			runtime.SetFinalizer(msg, func(any) { collected.Add(1) })
			msg = nil
			// As a long call's step would: the message is gone while the
			// handler still runs.
			for deadline := time.Now().Add(10 * time.Second); collected.Load() == handled.Load() && time.Now().Before(deadline); {
				runtime.GC()
				time.Sleep(time.Millisecond)
			}
			handled.Add(1)
			if dead {
				return &DeadLetter{Reason: "unreadable"}
			}
			return nil
		},
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	calls, err := js.Stream(ctx, protocol.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := calls.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if handled.Load() == 2 && info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d steps handled, %d left in %s", handled.Load(), info.State.Msgs, protocol.StreamCalls)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := collected.Load(); n != 2 {
		t.Errorf("%d of 2 messages collected while their handler ran", n)
	}
	deadStream, err := js.Stream(t.Context(), protocol.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := deadStream.GetLastMsgForSubject(t.Context(), protocol.PrefixDead+".a.t2")
	if err != nil {
		t.Fatalf("no dead letter of the second step: %v", err)
	}
	if string(raw.Data) != string(body) || raw.Header.Get("X-Trace") != "abc" || raw.Header.Get(protocol.HeaderDeadReason) != "unreadable" {
		t.Errorf("dead letter %q, headers %v", raw.Data, raw.Header)
	}
}

// TestLeaseOutlivesAckWait: a step whose handler runs for several ack
// waits keeps its lease (the consumer's one renewer tells the server it is
// in progress) and is delivered once; the renewer stops once no step is
// handled.
func TestLeaseOutlivesAckWait(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	topo := Topology{Storage: jetstream.MemoryStorage, AckWait: 600 * time.Millisecond, RetryDelay: 10 * time.Millisecond}.WithDefaults()
	if err := Setup(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	pub := &Publisher{JS: js}
	m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, "a", "t1"))
	m.Data = []byte(`{}`)
	if err := pub.publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	var deliveries atomic.Int32
	handled := make(chan struct{}, 4)
	c := &Consumer{
		JS: js, Stream: protocol.StreamCalls, Durable: protocol.ConsumerCalls, Dead: &DeadLetters{JS: js, Pub: pub},
		Handler: func(ctx context.Context, msg jetstream.Msg) error {
			deliveries.Add(1)
			time.Sleep(4 * topo.AckWait)
			handled <- struct{}{}
			return nil
		},
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-handled
	calls, err := js.Stream(ctx, protocol.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := calls.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the step was not acknowledged")
		}
	}
	if n := deliveries.Load(); n != 1 {
		t.Errorf("delivered %d times, want once", n)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c.leases.mu.Lock()
		running := c.leases.running
		c.leases.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the renewer still runs with no step handled")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
