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
// 600 letters of 60 KB of headers each (a malformed step carries its
// headers into its dead letter), then a gateway's answer to the step is
// refused by the worker. A load of /approvals reads a bounded part of
// those headers, newest first, so it still shows the refusal, and
// another agent's step beside it; it takes at most slowdownBound times
// what the same page takes on a console without dead letters (medians,
// loads interleaved).
func TestRefusedAnswersReadBounded(t *testing.T) {
	t.Parallel()
	r, quiet := newRig(t), newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	set := nats.Header{protocol.HeaderDeadSubject: {"turn.call.mallory.t1"}, protocol.HeaderDeadReason: {"malformed step"}}
	r.publishMany(t, ctx, protocol.Subject(protocol.PrefixDead, "mallory", "t1"), 600, 60, strings.Repeat("x", 1000), set,
		func(i int) []byte { return []byte(fmt.Sprint(i)) })
	for _, x := range []*rig{r, quiet} {
		x.hold(t, "mallory", "t1")
		x.hold(t, "quiet", "q1")
	}
	if err := r.gw.Decide(ctx, "mallory", "t1", 0, 1, []protocol.Decision{{CallID: "c1", Approved: true}}); err != nil {
		t.Fatal(err)
	}
	r.waitDead(t, ctx, 601)
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
	qc, _ := quiet.login(t)
	// The flood goes on between loads: each load has new letters to read.
	more := func() {
		r.publishMany(t, ctx, protocol.Subject(protocol.PrefixDead, "mallory", "t1"), 3, 60, strings.Repeat("y", 1000), set,
			func(i int) []byte { return []byte(fmt.Sprint(i)) })
	}
	m := medianTimes(t, 7, pageLoad{c, r.url + "/approvals", more}, pageLoad{qc, quiet.url + "/approvals", nil})
	t.Logf("/approvals median %s beside the flood, %s without it", m[0], m[1])
	if m[0] > slowdownBound*m[1] {
		t.Errorf("/approvals beside the flood takes %.1f times as long as without it (bound %d)", float64(m[0])/float64(m[1]), slowdownBound)
	}
}
