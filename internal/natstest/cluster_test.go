package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/natstest"
)

// TestCluster starts three nodes, creates an R3 stream, stops its leader
// (another node takes over and publishes keep working), restarts it on
// its store, and checks that nothing was lost.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := natstest.StartCluster(t, 3)
	if len(c.URLs()) != 3 || c.MetaLeader() == nil {
		t.Fatalf("urls %v, meta leader %v", c.URLs(), c.MetaLeader())
	}
	js := c.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	publish := func(n int) {
		t.Helper()
		for i := range n {
			for attempt := 0; ; attempt++ {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := js.Publish(pctx, "s.x", []byte{byte(i)})
				pcancel()
				if err == nil {
					break
				}
				if attempt == 50 {
					t.Fatalf("publish: %v", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	publish(10)
	var leader *natstest.Node
	if err := waitFor(ctx, func() bool { leader = c.StreamLeader("S"); return leader != nil }); err != nil {
		t.Fatal("no stream leader")
	}
	leader.Stop()
	if leader.Running() || leader.Server() != nil {
		t.Fatal("stopped node still running")
	}
	var next *natstest.Node
	if err := waitFor(ctx, func() bool { next = c.StreamLeader("S"); return next != nil }); err != nil {
		t.Fatal("no new stream leader")
	}
	if next == leader {
		t.Fatal("the stopped node still leads")
	}
	publish(10)
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	// Every node has all 20 messages, the restarted one included.
	for _, n := range c.Nodes {
		if got := storedMsgs(t, n, "S"); got != 20 {
			t.Errorf("%s holds %d messages, want 20", n.Name, got)
		}
	}
	// Rolling restart keeps the cluster serving.
	for _, n := range c.Nodes {
		if err := n.Restart(); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A request sent while the client reconnects can go unanswered: ask
	// again rather than wait long for one reply.
	var info *jetstream.StreamInfo
	for attempt := 0; info == nil; attempt++ {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := js.Stream(actx, "S")
		acancel()
		if err == nil {
			info = s.CachedInfo()
		} else if attempt == 30 {
			t.Fatal(err)
		}
	}
	if got := info.State.Msgs; got != 20 {
		t.Errorf("after a rolling restart the stream holds %d messages, want 20", got)
	}
}

// storedMsgs is the number of messages a node's replica of a stream holds.
func storedMsgs(t *testing.T, n *natstest.Node, stream string) uint64 {
	t.Helper()
	jsz, err := n.Server().Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, acc := range jsz.AccountDetails {
		for _, s := range acc.Streams {
			if s.Name == stream {
				return s.State.Msgs
			}
		}
	}
	t.Fatalf("%s has no replica of %s", n.Name, stream)
	return 0
}

func waitFor(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
