package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/protocol"
)

// An answer that approves a call as it was shown somewhere else (its
// digest is not the held call's) is refused by the real worker: nothing
// runs, the step stays held and the console shows the refusal; a form
// whose digest is not the held call's sends nothing; the page's own
// decision then decides.
func TestDigestBindsTheDecision(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	run := r.hold(t, "a1", "t1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	other := protocol.DecisionDigest("c1", "", "mark", []byte(`{"label":"harmless"}`))
	if err := r.gw.Decide(ctx, "a1", "t1", 0, 1, []protocol.Decision{{CallID: "c1", Approved: true, Digest: other}, {CallID: "c2", Approved: true}}); err != nil {
		t.Fatal(err)
	}
	_, err := run.Next(ctx)
	var dead *gateway.DeadLetterError
	if !errors.As(err, &dead) || dead.Step || !strings.Contains(dead.Error(), "other arguments than those that would run") {
		t.Fatalf("an answer with another call's digest: %v", err)
	}
	if m := marks(t, r.markDir); len(m) != 0 {
		t.Fatalf("mark ran on an answer for another value: %v", m)
	}
	c, csrf := r.login(t)
	page := get(t, c, r.url+"/approvals", http.StatusOK)
	if !strings.Contains(page, "refused 1 earlier answer") || !strings.Contains(page, "other arguments than those that would run") {
		t.Fatalf("the page does not show the refusal:\n%s", page)
	}
	form := r.digests(t, c, "a1", "t1", url.Values{"csrf": {csrf}, "agent_id": {"a1"}, "turn_id": {"t1"}, "step": {"0"},
		"call.0": {"c1"}, "decision.0": {"approve"}, "call.1": {"c2"}, "decision.1": {"approve"}})
	stale := url.Values{}
	for k, v := range form {
		stale[k] = v
	}
	stale.Set("digest.0", other)
	if code := r.post(t, c, "/approvals/decide", stale); code != http.StatusSeeOther {
		t.Fatalf("decide: %d", code)
	}
	if page := get(t, c, r.url+"/approvals", http.StatusOK); !strings.Contains(page, "is not what the page showed") {
		t.Errorf("a form with another digest was not refused:\n%s", page)
	}
	if code := r.post(t, c, "/approvals/decide", form); code != http.StatusSeeOther {
		t.Fatalf("decide: %d", code)
	}
	if _, err := run.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if m := marks(t, r.markDir); len(m) != 1 || m[0] != "deploy" {
		t.Errorf("marks %v, want [deploy]", m)
	}
}
