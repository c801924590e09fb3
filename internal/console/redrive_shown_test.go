package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A re-drive publishes a dead letter's whole payload and headers, as
// Approve runs a held call: a step that reached the delivery limit
// whose payload holds, past what the list shows, a second call, is not
// offered a re-drive on the list (only on its own page, where every
// byte is shown); one that no page shows whole is re-driven nowhere,
// and a re-drive posted for it publishes nothing.
func TestRedriveOnlyWhatIsShown(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	js := r.srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	step := func(turnID string, pad int) []byte {
		return paddedStep(turnID, pad, map[string]string{"type": "function_call", "call_id": "tail", "name": "sleep", "arguments": `{"ms":2}`})
	}
	seqs := map[string]uint64{}
	for turnID, pad := range map[string]int{"mid": 8 << 10, "big": 300 << 10} {
		dl := nats.NewMsg("turn.dead.a3." + turnID)
		dl.Data = step(turnID, pad)
		dl.Header.Set("Dead-Reason", "delivery limit reached: delivered 3 times")
		dl.Header.Set("Dead-Subject", "turn.call.a3."+turnID)
		dl.Header.Set("Dead-Stream", "TURN_CALLS")
		dl.Header.Set("Dead-Nats-Msg-Id", "a3."+turnID+".0")
		ack, err := js.PublishMsg(ctx, dl)
		if err != nil {
			t.Fatal(err)
		}
		seqs[turnID] = ack.Sequence
	}
	sub, err := r.srv.Connect(t).SubscribeSync("turn.call.a3.*")
	if err != nil {
		t.Fatal(err)
	}
	c, csrf := r.login(t)
	list := get(t, c, r.url+"/dead", http.StatusOK)
	if n := strings.Count(list, `action="/dead/redrive"`); n != 0 {
		t.Errorf("the list offers %d re-drive(s) of letters whose payload it does not show whole", n)
	}
	if strings.Count(list, `class="noredrive"`) != 2 {
		t.Error("the list does not say why the letters cannot be re-driven there")
	}
	mid := get(t, c, fmt.Sprintf("%s/dead/letter?seq=%d", r.url, seqs["mid"]), http.StatusOK)
	if !strings.Contains(mid, `action="/dead/redrive"`) || !strings.Contains(html.UnescapeString(mid), `"call_id": "tail"`) {
		t.Error("the letter's own page, which shows it whole, offers no re-drive")
	}
	big := get(t, c, fmt.Sprintf("%s/dead/letter?seq=%d", r.url, seqs["big"]), http.StatusOK)
	if strings.Contains(big, `action="/dead/redrive"`) || !strings.Contains(big, "cannot be re-driven from the console") {
		t.Error("a letter no page shows whole is offered a re-drive")
	}
	// A re-drive posted anyway (a page older than the rule, a crafted
	// form) publishes nothing.
	if code := r.post(t, c, "/dead/redrive", url.Values{"csrf": {csrf}, "seq": {strconvU(seqs["big"])}}); code != http.StatusSeeOther {
		t.Fatalf("re-drive: %d", code)
	}
	if p := get(t, c, r.url+"/dead", http.StatusOK); !strings.Contains(p, "is not re-driven") {
		t.Error("the refused re-drive is not reported")
	}
	// The one shown whole is re-driven: its step is published, the other
	// one's is not.
	if code := r.post(t, c, "/dead/redrive", url.Values{"csrf": {csrf}, "seq": {strconvU(seqs["mid"])}}); code != http.StatusSeeOther {
		t.Fatalf("re-drive: %d", code)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "turn.call.a3.mid" {
		t.Errorf("published on %s: the letter no page showed whole was re-driven", m.Subject)
	}
}

// paddedStep is a step of agent a3's turn turnID: a short call, a call
// whose arguments carry pad bytes, and tail last.
func paddedStep(turnID string, pad int, tail map[string]string) []byte {
	b, _ := json.Marshal(map[string]any{"agent_id": "a3", "turn_id": turnID, "step": 0,
		"context": map[string]any{"kind": "text", "bindings": map[string]bool{"diagnostics": true}},
		"output": []map[string]string{
			{"type": "function_call", "call_id": "c1", "name": "sleep", "arguments": `{"ms":1}`},
			{"type": "function_call", "call_id": "c2", "name": "sleep", "arguments": `{"ms":1,"pad":"` + strings.Repeat("p", pad) + `"}`},
			tail,
		}})
	return b
}
