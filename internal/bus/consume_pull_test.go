package bus

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// TestPullIsNotStranded: steps stored before Run starts, each handled
// until the test ends, are all handed to a handler even when the server
// drops Run's pull requests without a word.
//
// nats.go's Messages iterator counts the steps its requests still have
// coming, and asks for more only from Next, once fewer than half its
// batch are to come and no request is being sent; when the server holds
// fewer than it counts (a request dropped, or all of a request's steps
// delivered and taken before the goroutine that sent it clears its
// flag), Next waits for steps that never come, and only its missed
// heartbeats pull again. The state is made here every time: a consumer
// that keeps one pull request at most (MaxWaiting 1) drops the re-pull
// sent while the first request still waits (a request with a heartbeat
// is dropped without a 409), and Run is stranded once that request is
// filled. With heartbeats of 20 s, the missed-heartbeat re-pull comes
// after 40 s: the deadline, 30 s, is met only if Run pulls again by
// itself.
func TestPullIsNotStranded(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	topo := Topology{Storage: jetstream.MemoryStorage}.WithDefaults()
	if err := Setup(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	durable := topo.Consumers()[protocol.StreamApprovals].Durable
	natstest.OnePullWaiting(t, js, protocol.StreamApprovals, durable)
	// Concurrency 128 pulls 64 at a time, asking for more below 32.
	const concurrency, first, steps = 128, 40, 120
	pub := &Publisher{JS: js}
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := js.Publish(ctx, protocol.Subject(protocol.PrefixApproval, "a", fmt.Sprintf("t%d", i)), []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(0, first)
	var mu sync.Mutex
	handled := 0
	release := make(chan struct{})
	c := &Consumer{
		JS: js, Stream: protocol.StreamApprovals, Durable: durable, Dead: &DeadLetters{JS: js, Pub: pub},
		Concurrency: concurrency, Grace: 10 * time.Second, heartbeat: 20 * time.Second,
		Handler: func(ctx context.Context, _ jetstream.Msg) error {
			mu.Lock()
			handled++
			mu.Unlock()
			<-release
			return nil
		},
	}
	started := func() int {
		mu.Lock()
		defer mu.Unlock()
		return handled
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		close(release)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// The first request (64) takes the 40 steps stored and waits for 24
	// more; the re-pull sent meanwhile is dropped. The rest arrive: the
	// first request takes 24, and Run counts 33 more coming.
	for deadline := time.Now().Add(30 * time.Second); started() < first && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	publish(first, steps)
	deadline := time.Now().Add(30 * time.Second)
	for started() < steps && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := started(); n < steps {
		var state string
		if c, err := js.Consumer(ctx, protocol.StreamApprovals, durable); err == nil {
			i := c.CachedInfo()
			state = fmt.Sprintf("delivered %d, ack pending %d, still stored %d, pull requests waiting %d", i.Delivered.Consumer, i.NumAckPending, i.NumPending, i.NumWaiting)
		}
		t.Fatalf("%d of %d stored steps were handed to a handler: the pull stopped (%s)", n, steps, state)
	}
}
