package console_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/protocol"
)

// A model spells a command with JSON escapes: rm as \u0072\u006d, a
// newline as \u000a, an override as \u202e. The page shows the value
// as it runs (echo hello⟦U+000A LINE FEED⟧rm -rf ~ and the override's
// marker), never an
// escape a person has to decode; approved through the page with its
// digest, the call runs with exactly that value, and another agent's
// step beside it is decided as usual.
func TestEscapesShownAsTheyRun(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := `{"note":"echo hello\u000a\u0072\u006d -rf ~ \u003b \u202e\u0041 \ud83d\ude00 \/x \u0022"}`
	run, err := r.gw.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "esc", Step: 0, Context: diagCtx, Output: []json.RawMessage{fc("c1", "ping", args)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run.Close)
	if _, err := run.Next(ctx); err != nil {
		t.Fatal(err)
	}
	quiet := r.hold(t, "quiet", "q1")
	c, csrf := r.login(t)
	page := get(t, c, r.url+"/approvals", http.StatusOK)
	sec := html.UnescapeString(strings.Split(strings.SplitAfter(page, `data-turn="esc"`)[1], "</fieldset>")[0])
	want := `"note": "echo hello⟦U+000A LINE FEED⟧rm -rf ~ ; ⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧A ⟦U+1F600 GRINNING FACE 😀⟧ /x \""`
	if !strings.Contains(strings.ReplaceAll(strings.ReplaceAll(sec, `<span class="mark">`, ""), `<span class="mark look">`, ""), strings.ReplaceAll(want, "⟧", "⟧</span>")) {
		t.Errorf("the page shows\n%s\nwant %s", sec, want)
	}
	if strings.Contains(sec, `\u00`) || strings.Contains(sec, `\u20`) {
		t.Errorf("an escape is on the page: %s", sec)
	}
	for _, agent := range []string{"a1", "quiet"} {
		turnID, v := "esc", url.Values{"call.0": {"c1"}, "decision.0": {"approve"}}
		if agent == "quiet" {
			turnID = "q1"
			v.Set("call.1", "c2")
			v.Set("decision.1", "reject")
		}
		v.Set("csrf", csrf)
		v.Set("agent_id", agent)
		v.Set("turn_id", turnID)
		v.Set("step", "0")
		if code := r.post(t, c, "/approvals/decide", r.digests(t, c, agent, turnID, v)); code != http.StatusSeeOther {
			t.Fatalf("decide: %d", code)
		}
	}
	done, err := run.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var item struct{ Output string }
	_ = json.Unmarshal(done.Items[0], &item)
	if item.Output != "pong echo hello\nrm -rf ~ ; \u202eA \U0001F600 /x \"" {
		t.Errorf("ran with %q", item.Output)
	}
	if _, err := quiet.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if m := marks(t, r.markDir); len(m) != 1 || m[0] != "deploy" {
		t.Errorf("the quiet agent's step: marks %v", m)
	}
}
