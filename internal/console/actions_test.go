package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/protocol"
)

func (r *rig) post(t *testing.T, c *http.Client, path string, v url.Values) int {
	t.Helper()
	resp, err := c.PostForm(r.url+path, v)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// An answer a gateway sent that missed a held call is dead-lettered; the
// page shows the refusal, and the console's correction (numbered past
// it, so that de-duplication keeps it) decides the step.
func TestCorrectARefusedAnswer(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	run := r.hold(t, "a1", "t1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := r.gw.Decide(ctx, "a1", "t1", 0, 1, []protocol.Decision{{CallID: "c1", Approved: true}}); err != nil {
		t.Fatal(err)
	}
	c, csrf := r.login(t)
	var page string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		page = get(t, c, r.url+"/approvals", http.StatusOK)
		if strings.Contains(page, "refused 1 earlier answer") {
			break
		}
	}
	if !strings.Contains(page, "refused 1 earlier answer") || !strings.Contains(page, "no decision for the pending call") {
		t.Fatalf("the page does not show the refused answer:\n%s", page)
	}
	form := r.digests(t, c, "a1", "t1", url.Values{"csrf": {csrf}, "agent_id": {"a1"}, "turn_id": {"t1"}, "step": {"0"},
		"call.0": {"c1"}, "decision.0": {"approve"}, "call.1": {"c2"}, "decision.1": {"approve"}})
	code := r.post(t, c, "/approvals/decide", form)
	if code != http.StatusSeeOther {
		t.Fatalf("decide: %d", code)
	}
	for {
		ev, err := run.Next(ctx)
		var dead *gateway.DeadLetterError
		if errors.As(err, &dead) && !dead.Step {
			continue // the refused first answer
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ev.(*protocol.StepDone); ok {
			break
		}
	}
	if page = get(t, c, r.url+"/approvals", http.StatusOK); !strings.Contains(page, "a1.t1.0.approval.2") {
		t.Errorf("the correction was not sent as answer 2:\n%s", page)
	}
	// A decision for a step that is no longer pending sends nothing.
	code = r.post(t, c, "/approvals/decide", form)
	if code != http.StatusSeeOther {
		t.Fatalf("second decide: %d", code)
	}
	if page = get(t, c, r.url+"/approvals", http.StatusOK); !strings.Contains(page, "was decided already") || strings.Contains(page, "a1.t1.0.approval.3") {
		t.Errorf("a decided step was answered again:\n%s", page)
	}
	// A form that does not decide every held call sends nothing.
	r.hold(t, "a1", "t2")
	code = r.post(t, c, "/approvals/decide", r.digests(t, c, "a1", "t2", url.Values{"csrf": {csrf}, "agent_id": {"a1"}, "turn_id": {"t2"}, "step": {"0"},
		"call.0": {"c1"}, "decision.0": {"approve"}, "call.1": {"c2"}}))
	if page = get(t, c, r.url+"/approvals", http.StatusOK); code != http.StatusSeeOther || !strings.Contains(page, "Decide every held call") {
		t.Errorf("an incomplete form: %d\n%s", code, page)
	}
}

// A step the delivery limit dead-lettered is re-driven on its subject:
// the real worker runs it and its events follow. A malformed one offers
// no re-drive and refuses one.
func TestRedrive(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	js := r.srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dl := nats.NewMsg("turn.dead.a3.t1")
	dl.Data = []byte(`{"agent_id":"a3","turn_id":"t1","step":0,"context":{"kind":"text","bindings":{"diagnostics":true}},"output":[{"type":"function_call","call_id":"c1","name":"sleep","arguments":"{\"ms\":1}"}]}`)
	dl.Header.Set("Dead-Reason", "delivery limit reached: delivered 3 times")
	dl.Header.Set("Dead-Subject", "turn.call.a3.t1")
	dl.Header.Set("Dead-Stream", "TURN_CALLS")
	dl.Header.Set("Dead-Nats-Msg-Id", "a3.t1.0")
	ack, err := js.PublishMsg(ctx, dl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "turn.call.a3.t2", []byte("not a step")); err != nil {
		t.Fatal(err)
	}
	sub, err := r.srv.Connect(t).SubscribeSync("turn.call.output.a3.t1")
	if err != nil {
		t.Fatal(err)
	}
	c, csrf := r.login(t)
	page := get(t, c, r.url+"/dead", http.StatusOK)
	if strings.Count(page, `action="/dead/redrive"`) != 1 || !strings.Contains(page, "never run twice") {
		t.Fatalf("want one re-drive button, with its note:\n%s", page)
	}
	if code := r.post(t, c, "/dead/redrive", url.Values{"seq": {"1"}}); code != http.StatusForbidden {
		t.Errorf("re-drive without CSRF: %d", code)
	}
	seq := strings.TrimSpace(strings.Split(strings.SplitAfter(page, `name="seq" value="`)[1], `"`)[0])
	if seq != strconvU(ack.Sequence) {
		t.Fatalf("re-drive form names %q, want %d", seq, ack.Sequence)
	}
	if code := r.post(t, c, "/dead/redrive", url.Values{"csrf": {csrf}, "seq": {seq}}); code != http.StatusSeeOther {
		t.Fatalf("re-drive: %d", code)
	}
	var types []string
	for len(types) < 2 {
		m, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("re-driven step's events: %v (got %v)", err, types)
		}
		var ev struct{ Type string }
		_ = json.Unmarshal(m.Data, &ev)
		types = append(types, ev.Type)
	}
	if types[0] != "call.output" || types[1] != "step.done" {
		t.Errorf("events %v", types)
	}
	// The malformed one (the worker's own dead letter) is refused.
	for _, d := range strings.Split(page, `<section class="dead"`)[1:] {
		if strings.Contains(d, "malformed step") {
			s := strings.SplitAfter(d, `data-seq="`)[1]
			if code := r.post(t, c, "/dead/redrive", url.Values{"csrf": {csrf}, "seq": {s[:strings.IndexByte(s, '"')]}}); code != http.StatusSeeOther {
				t.Errorf("re-drive of a malformed step: %d", code)
			}
			if p := get(t, c, r.url+"/dead", http.StatusOK); !strings.Contains(p, "may not be re-driven") {
				t.Errorf("a malformed step was re-driven")
			}
		}
	}
}

func strconvU(v uint64) string { b, _ := json.Marshal(v); return string(b) }

// The live stream carries the events of the turns its filter selects,
// by turn and by fairness key, and none of the others.
func TestLiveFilters(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	c, _ := r.login(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := func(q string) *bufio.Reader {
		req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/api/live?"+q, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("live %s: %s %s", q, resp.Status, resp.Header.Get("Content-Type"))
		}
		br := bufio.NewReader(resp.Body)
		if l, _ := br.ReadString('\n'); !strings.HasPrefix(l, ": live") {
			t.Fatalf("live %s: first line %q", q, l)
		}
		return br
	}
	byTurn := open("turn=t5")
	byKey := open("key=tenant-x")
	if code := get(t, c, r.url+"/api/live?agent=a.b", http.StatusBadRequest); code == "" {
		t.Fatal("no answer")
	}
	keyed := diagCtx
	keyed.Fairness = protocol.Fairness{Key: "tenant-x"}
	for _, s := range []struct {
		turn string
		c    protocol.Context
	}{{"t6", diagCtx}, {"t7", keyed}, {"t5", diagCtx}} {
		run, err := r.gw.Send(ctx, protocol.Step{AgentID: "a9", TurnID: s.turn, Step: 0, Context: s.c, Output: []json.RawMessage{fc("c1", "sleep", `{"ms":1}`)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		run.Close()
	}
	read := func(br *bufio.Reader, until string) []string {
		var turns []string
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("live: %v after %v", err, turns)
			}
			d, ok := strings.CutPrefix(l, "data: ")
			if !ok {
				continue
			}
			var ev struct {
				TurnID string `json:"turn_id"`
				Source string
				Type   string
			}
			if err := json.Unmarshal([]byte(d), &ev); err != nil {
				t.Fatalf("live event %q: %v", d, err)
			}
			turns = append(turns, ev.TurnID)
			if ev.Type == "step.done" && ev.TurnID == until {
				return turns
			}
		}
	}
	for _, tn := range read(byTurn, "t5") {
		if tn != "t5" {
			t.Errorf("turn filter t5 passed an event of %s", tn)
		}
	}
	for _, tn := range read(byKey, "t7") {
		if tn != "t7" {
			t.Errorf("key filter tenant-x passed an event of %s", tn)
		}
	}
}
