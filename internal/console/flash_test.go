package console_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/protocol"
)

// The message a page shows once after an action (the flash) carries
// what other people and models wrote: an operator whose answer lost is
// told whose answer decided, with that operator's name and the call ids
// of that answer (a model's, any printable characters: right-to-left
// letters, look-alikes). One operator, whose name carries a
// right-to-left override, approves a held step whose call id is in
// Hebrew letters with a Cyrillic look-alike; a second operator's answer
// from the page drawn before comes too late. The second operator's
// message names every character outside printable ASCII, as every
// other part of the page does.
func TestFlashNamesWhatOthersWrote(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	callID := "c\u05d0\u05d1 \u0430pproved"
	run, err := r.gw.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t1", Step: 0, Context: diagCtx,
		Output: []json.RawMessage{fc(callID, "ping", `{"note":"hi"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if _, err := run.Next(ctx); err != nil {
		t.Fatal(err)
	}
	mallory, mcsrf := r.loginAs(t, "Mallory \u202eevol\u202c")
	ada, acsrf := r.loginAs(t, "Ada")
	form := func(csrf, decision string) url.Values {
		v := r.digests(t, ada, "a1", "t1", url.Values{"csrf": {csrf}, "agent_id": {"a1"}, "turn_id": {"t1"}, "step": {"0"},
			"call.0": {callID}, "decision.0": {decision}})
		v.Set("csrf", csrf)
		return v
	}
	late := form(acsrf, "reject")
	if code := r.post(t, mallory, "/approvals/decide", form(mcsrf, "approve")); code != http.StatusSeeOther {
		t.Fatalf("Mallory's decision: %d", code)
	}
	if _, err := run.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := ada.PostForm(r.url+"/approvals/decide", late)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	page := get(t, ada, r.url+resp.Header.Get("Location"), http.StatusOK)
	m := flashRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("Ada is not told what became of her answer")
	}
	text := html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[1], ""))
	if !strings.Contains(text, "did NOT decide") {
		t.Errorf("Ada was told %q", text)
	}
	for _, want := range []string{"⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧", "⟦U+05D0 HEBREW LETTER ALEF⟧", "⟦U+0430 CYRILLIC SMALL LETTER A а⟧"} {
		if !strings.Contains(text, want) {
			t.Errorf("the message does not name %s: %q", want, text)
		}
	}
	if rest := regexp.MustCompile(`⟦[^⟧]*⟧`).ReplaceAllString(text, ""); strings.IndexFunc(rest, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
		t.Errorf("the message draws characters outside printable ASCII as they are: %q", rest)
	}
}

// An answer that comes after the step's record is gone (decided, then
// removed by the bucket's age bound or an operator) is an answer too:
// the audit keeps it as lost, and its operator is told it did not
// decide, as when the record is still there and decided.
func TestAnswerAfterTheRecordIsGone(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := r.hold(t, "a1", "gone")
	ada, acsrf := r.loginAs(t, "Ada")
	bob, bcsrf := r.loginAs(t, "Bob")
	form := func(csrf, decision string) url.Values {
		v := r.digests(t, ada, "a1", "gone", url.Values{"csrf": {csrf}, "agent_id": {"a1"}, "turn_id": {"gone"}, "step": {"0"},
			"call.0": {"c1"}, "decision.0": {decision}, "call.1": {"c2"}, "decision.1": {decision}})
		v.Set("csrf", csrf)
		return v
	}
	late := form(bcsrf, "approve")
	if code := r.post(t, ada, "/approvals/decide", form(acsrf, "reject")); code != http.StatusSeeOther {
		t.Fatalf("Ada's decision: %d", code)
	}
	if _, err := run.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	js := r.srv.JetStream(t)
	state, err := js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	if err := state.Purge(ctx, "approval.a1.gone.0"); err != nil {
		t.Fatal(err)
	}
	resp, err := bob.PostForm(r.url+"/approvals/decide", late)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	m := flashRe.FindStringSubmatch(get(t, bob, r.url+resp.Header.Get("Location"), http.StatusOK))
	if m == nil || !strings.Contains(m[1], "did NOT decide") {
		t.Errorf("Bob is not told his answer did not decide: %q", m)
	}
	audit, err := js.KeyValue(ctx, "CONSOLE_AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	var bobs []auditRecord
	for _, a := range auditRecords(ctx, t, audit, "decision.a1.gone.>") {
		if a.By == "Bob" {
			bobs = append(bobs, a)
		}
	}
	if len(bobs) != 1 || bobs[0].Outcome != "lost" {
		t.Errorf("Bob's late answer in the audit: %+v, want one, lost", bobs)
	}
}
