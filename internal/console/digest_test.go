package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/protocol"
	"golang.org/x/text/unicode/norm"
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

// A decision whose digest is of a value that differs from the held one
// only by normalization (NFD for NFC, NFC for NFD) or by an invisible
// character (U+200B, U+2060, U+FEFF, U+00AD) is refused by the real
// worker: nothing runs and the step stays held; the digest of the exact
// bytes then decides, and what ran is those bytes.
func TestDigestSeesNormalizationAndInvisibles(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for turn, note := range map[string]string{"nfc": "rm -rf /tmp/caf\u00e9", "nfd": "rm -rf /tmp/cafe\u0301"} {
		args, _ := json.Marshal(map[string]string{"note": note})
		run, err := r.gw.Send(ctx, protocol.Step{AgentID: "a1", TurnID: turn, Step: 0, Context: diagCtx,
			Output: []json.RawMessage{fc("c1", "ping", string(args))}})
		if err != nil {
			t.Fatal(err)
		}
		defer run.Close()
		if _, err := run.Next(ctx); err != nil {
			t.Fatal(err)
		}
		other := norm.NFD.String(note)
		if turn == "nfd" {
			other = norm.NFC.String(note)
		}
		if other == note {
			t.Fatalf("%s: the normalized form is the same string", turn)
		}
		variants := []string{other, strings.Replace(note, "/tmp/", "/tmp/\u200b", 1), note + "\u2060",
			"\ufeff" + note, strings.Replace(note, "rm", "r\u00adm", 1)}
		for i, v := range variants {
			b, _ := json.Marshal(map[string]string{"note": v})
			d := protocol.DecisionDigest("c1", "", "ping", b)
			if err := r.gw.Decide(ctx, "a1", turn, 0, i+1, []protocol.Decision{{CallID: "c1", Approved: true, Digest: d}}); err != nil {
				t.Fatal(err)
			}
			_, err := run.Next(ctx)
			var dead *gateway.DeadLetterError
			if !errors.As(err, &dead) || !strings.Contains(dead.Error(), "other arguments than those that would run") {
				t.Fatalf("%s: an answer for %+q (held %+q): %v", turn, v, note, err)
			}
		}
		d := protocol.DecisionDigest("c1", "", "ping", args)
		if err := r.gw.Decide(ctx, "a1", turn, 0, len(variants)+1, []protocol.Decision{{CallID: "c1", Approved: true, Digest: d}}); err != nil {
			t.Fatal(err)
		}
		done, err := run.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var item struct{ Output string }
		_ = json.Unmarshal(done.Items[0], &item)
		if item.Output != "pong "+note {
			t.Errorf("%s: ran %+q, want %+q", turn, item.Output, "pong "+note)
		}
	}
}

// Two agents' steps hold the same call ids with the same arguments. A
// gateway's answer to one carrying the digests the console's page showed
// for the other is refused by the real worker (the digest is bound to
// the agent, turn and step): nothing runs; the console's own decision
// for each step then decides it.
func TestStepDigestBindsTheHold(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	runA, runB := r.hold(t, "a1", "t1"), r.hold(t, "a2", "t1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, csrf := r.login(t)
	formA := r.digests(t, c, "a1", "t1", url.Values{"csrf": {csrf}, "agent_id": {"a1"}, "turn_id": {"t1"}, "step": {"0"},
		"call.0": {"c1"}, "decision.0": {"approve"}, "call.1": {"c2"}, "decision.1": {"approve"}})
	formB := r.digests(t, c, "a2", "t1", url.Values{"csrf": {csrf}, "agent_id": {"a2"}, "turn_id": {"t1"}, "step": {"0"},
		"call.0": {"c1"}, "decision.0": {"reject"}, "call.1": {"c2"}, "decision.1": {"reject"}})
	if formA.Get("digest.0") == formB.Get("digest.0") {
		t.Fatalf("the same call held in two steps has one digest: %s", formA.Get("digest.0"))
	}
	// a1's page, replayed as an answer for a2.
	if err := r.gw.Decide(ctx, "a2", "t1", 0, 1, []protocol.Decision{{CallID: "c1", Approved: true, Digest: formA.Get("digest.0")},
		{CallID: "c2", Approved: true, Digest: formA.Get("digest.1")}}); err != nil {
		t.Fatal(err)
	}
	_, err := runB.Next(ctx)
	var dead *gateway.DeadLetterError
	if !errors.As(err, &dead) || !strings.Contains(dead.Error(), "or on another hold") {
		t.Fatalf("an answer with another step's digests: %v", err)
	}
	if m := marks(t, r.markDir); len(m) != 0 {
		t.Fatalf("mark ran on an answer made for another step: %v", m)
	}
	for _, f := range []url.Values{formA, formB} {
		if code := r.post(t, c, "/approvals/decide", f); code != http.StatusSeeOther {
			t.Fatalf("decide: %d", code)
		}
	}
	for _, run := range []*gateway.StepRun{runA, runB} {
		if _, err := run.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if m := marks(t, r.markDir); len(m) != 1 || m[0] != "deploy" {
		t.Errorf("marks %v: want a1's approved mark alone", m)
	}
}
