package bus

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// TestStopWithEveryHandlerBusy: a stop while every handler is busy and
// more steps are prefetched behind them ends within the grace period.
// The prefetched steps are handed back, the running ones abandoned at
// the end of Grace (they will be delivered again), and Run returns: it
// used to wait, before the grace period even began, for a handler to
// be free to take the next prefetched step, which a handler that runs
// until it is abandoned never is.
func TestStopWithEveryHandlerBusy(t *testing.T) {
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
	for _, turn := range []string{"t1", "t2", "t3", "t4"} {
		m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, "a", turn))
		m.Data = []byte(`{}`)
		if err := pub.publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	var started, abandoned atomic.Int32
	c := &Consumer{
		JS: js, Stream: protocol.StreamCalls, Durable: protocol.ConsumerCalls, Dead: &DeadLetters{JS: js, Pub: pub},
		Concurrency: 1, Grace: 200 * time.Millisecond,
		Handler: func(ctx context.Context, msg jetstream.Msg) error {
			started.Add(1)
			<-ctx.Done() // a call that runs until it is abandoned
			abandoned.Add(1)
			return ctx.Err()
		},
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); started.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no step was handled")
		}
	}
	// Let the pull prefetch the rest behind the busy handler.
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return 30 s after the stop (grace %s); %d handled", c.Grace, started.Load())
	}
	if n := abandoned.Load(); n != 1 {
		t.Errorf("%d handlers abandoned, want 1", n)
	}
}
