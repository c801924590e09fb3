package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// A call held for input (protocol 1.3) is shown beside the approvals
// with its server's question and the requested fields as a form; the
// answer typed into it goes out as a decision with that input and the
// call's digest; a required field left empty sends nothing.
func TestInputRequestForm(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js := r.srv.JetStream(t)
	kv, err := js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"title":"crash on start"}`)
	schema := json.RawMessage(`{"type":"object","properties":{"repo":{"type":"string","title":"Repository"},"count":{"type":"integer"},"private":{"type":"boolean"},"kind":{"type":"string","enum":["bug","feature"]}},"required":["repo","kind"]}`)
	p := turn.PendingStep{AgentID: "a1", TurnID: "in1", Step: 0, State: turn.StatePending, ExpiresAt: time.Now().Add(time.Hour).UTC(),
		Calls: []turn.HeldCall{{Type: protocol.ItemFunctionCall, CallID: "c1", Namespace: "github", Name: "create_issue", Valid: args,
			Approval: protocol.PendingInput, Input: &turn.InputHold{Request: protocol.InputRequest{Message: "Which repository?\u202e", RequestedSchema: schema},
				Arguments: args, Round: 1, Live: true}}}}
	b, _ := json.Marshal(p)
	if _, err := kv.Create(ctx, "approval.a1.in1.0", b); err != nil {
		t.Fatal(err)
	}
	sub, err := r.srv.Connect(t).SubscribeSync("turn.approval.a1.in1")
	if err != nil {
		t.Fatal(err)
	}
	c, csrf := r.login(t)
	page := get(t, c, r.url+"/approvals", http.StatusOK)
	for _, want := range []string{"The tool's server asks:", "Which repository?", "⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧", `name="input.0.repo"`,
		`name="input.0.count" value="" inputmode="numeric"`, `type="checkbox" name="input.0.private"`, `<select name="input.0.kind">`, "Answer with the form", "Decline"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	form := r.digests(t, c, "a1", "in1", url.Values{"csrf": {csrf}, "agent_id": {"a1"}, "turn_id": {"in1"}, "step": {"0"},
		"call.0": {"c1"}, "decision.0": {"approve"}, "input.0.count": {"3"}, "input.0.private": {"true"}, "input.0.kind": {"bug"}})
	if code := r.post(t, c, "/approvals/decide", form); code != http.StatusSeeOther {
		t.Fatalf("decide: %d", code)
	}
	if page := get(t, c, r.url+"/approvals", http.StatusOK); !strings.Contains(page, "&#34;Repository&#34; is required") {
		t.Errorf("an answer without a required field was not refused")
	}
	if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("an incomplete answer was sent: %s", m.Data)
	}
	form.Set("input.0.repo", "agentbull/toolruntime")
	if code := r.post(t, c, "/approvals/decide", form); code != http.StatusSeeOther {
		t.Fatalf("decide: %d", code)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a, err := protocol.ParseApproval(m.Subject, m.Data, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := a.Decisions[0]
	var in map[string]any
	_ = json.Unmarshal(d.Input, &in)
	if !d.Approved || in["repo"] != "agentbull/toolruntime" || in["count"] != 3.0 || in["private"] != true || in["kind"] != "bug" || len(in) != 4 {
		t.Errorf("decision %+v, input %s", d, d.Input)
	}
	if d.Digest != protocol.DecisionDigest("c1", "github", "create_issue", args) {
		t.Errorf("digest %q", d.Digest)
	}
}
