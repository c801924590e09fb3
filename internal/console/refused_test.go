package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/protocol"
)

// An agent floods the dead letters of its own held step's turn with
// 1,500 letters of 60 KB of headers each (a malformed step carries its
// headers into its dead letter), then a gateway's answer to the step is
// refused by the worker. A load of /approvals reads a bounded part of
// those headers, newest first, so it still shows the refusal, and
// another agent's step beside it.
func TestRefusedAnswersReadBounded(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.hold(t, "mallory", "t1")
	r.hold(t, "quiet", "q1")
	js := r.srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	val := strings.Repeat("x", 1000)
	for i := range 600 {
		m := nats.NewMsg(protocol.Subject(protocol.PrefixDead, "mallory", "t1"))
		for h := range 60 {
			m.Header.Set(fmt.Sprintf("X-H%d", h), val)
		}
		m.Header.Set(protocol.HeaderDeadSubject, "turn.call.mallory.t1")
		m.Header.Set(protocol.HeaderDeadReason, "malformed step")
		m.Data = []byte(fmt.Sprint(i))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.gw.Decide(ctx, "mallory", "t1", 0, 1, []protocol.Decision{{CallID: "c1", Approved: true}}); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs > 600 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the refused answer was not dead-lettered")
		case <-time.After(100 * time.Millisecond):
		}
	}
	c, _ := r.login(t)
	in := r.consoleNC.Stats().InBytes
	page := get(t, c, r.url+"/approvals", http.StatusOK)
	read := r.consoleNC.Stats().InBytes - in
	t.Logf("/approvals read %d KiB from NATS beside %d MiB of the flood's headers", read>>10, 600*60*1000>>20)
	if read > 16<<20 {
		t.Errorf("a load of /approvals read %d MiB", read>>20)
	}
	if !strings.Contains(page, "refused 1 earlier answer") || !strings.Contains(page, `data-agent="quiet"`) {
		t.Errorf("the page lacks the refusal (%v) or the quiet agent's step (%v)", strings.Contains(page, "refused 1 earlier answer"), strings.Contains(page, `data-agent="quiet"`))
	}
}
