package console_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/protocol"
)

// publishMany publishes n messages on subject, each with hdrs headers
// X-H<i> set to val, the headers of set, and the payload body(i).
func (r *rig) publishMany(t *testing.T, ctx context.Context, subject string, n, hdrs int, val string, set nats.Header, body func(i int) []byte) {
	t.Helper()
	js := r.srv.JetStream(t)
	for i := range n {
		m := nats.NewMsg(subject)
		for h := range hdrs {
			m.Header.Set(fmt.Sprintf("X-H%d", h), val)
		}
		for k, v := range set {
			m.Header[k] = v
		}
		m.Data = body(i)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

// waitDead waits until TURN_DEAD holds at least n letters.
func (r *rig) waitDead(t *testing.T, ctx context.Context, n uint64) *jetstream.StreamInfo {
	t.Helper()
	st, err := r.srv.JetStream(t).Stream(ctx, protocol.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs >= n {
			return info
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d dead-lettered", info.State.Msgs, n)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
