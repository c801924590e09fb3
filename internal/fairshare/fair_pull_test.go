package fairshare

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

// TestFairPullIsNotStranded: steps stored before the intake runs, each
// running until the test ends (calls in flight), are all taken in even
// when the server drops the intake's pull requests without a word.
//
// nats.go's Consume counts the steps its requests still have coming;
// when the server holds fewer than that (package repull says how that
// happens on a loaded machine), the last step delivered leaves it waiting
// for steps that never come, and only its missed heartbeats pull again.
// The same state is made here at once and every time: a work consumer
// that keeps one pull request at most (MaxWaiting 1) drops the re-pull
// sent while the first request still waits for steps (a request with a
// heartbeat is dropped without a 409), so the intake is stranded once
// that request is filled. With heartbeats of 20 s, the missed-heartbeat re-pull
// would come after 40 s: the deadline, 30 s, is met only if the intake
// pulls again by itself.
func TestFairPullIsNotStranded(t *testing.T) {
	r := newFairRig(t, 1)
	ctx := context.Background()
	durable := r.topo.Consumers()[protocol.StreamCalls].Durable
	natstest.OnePullWaiting(t, r.js, protocol.StreamCalls, durable)
	const pull, first, steps = 64, 40, 256
	r.publish("a1", "", 0, first)
	var mu sync.Mutex
	var dones []func(error)
	f := r.fair(r.js, steps+10, steps+10, nil)
	f.Handler = nil
	f.Pull = pull
	f.heartbeat = 20 * time.Second
	f.Start = func(_ context.Context, _ jetstream.Msg, done func(error)) {
		mu.Lock()
		dones = append(dones, done)
		mu.Unlock()
	}
	started := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(dones)
	}
	stop := r.run(f)
	defer func() {
		mu.Lock()
		rest := dones
		dones = nil
		mu.Unlock()
		for _, done := range rest {
			done(nil)
		}
		stop()
	}()
	// The first request (64) takes the 40 steps stored and waits for 24
	// more; the re-pull sent meanwhile is dropped. The rest arrive: the
	// first request takes 24, and the intake counts 40 more coming.
	for deadline := time.Now().Add(30 * time.Second); started() < first && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	r.publish("a1", "", 0, steps-first)
	deadline := time.Now().Add(30 * time.Second)
	for started() < steps && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := started(); n < steps {
		var state string
		if c, err := r.js.Consumer(ctx, protocol.StreamCalls, durable); err == nil {
			i := c.CachedInfo()
			state = fmt.Sprintf("delivered %d, ack pending %d, still stored %d, pull requests waiting %d", i.Delivered.Consumer, i.NumAckPending, i.NumPending, i.NumWaiting)
		}
		t.Fatalf("%d of %d stored steps were taken in: the intake's pull stopped (%s)", n, steps, state)
	}
}
