package console_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Dead letters of steps that reached the delivery limit, as a person
// re-drives them in Chromium: a short one, one whose payload hides a
// call past what the list shows, one of 300 headers (past what the list
// shows of them), and one of 300 KB that no page shows whole. Wherever
// a Re-drive button is offered, every character of the payload and of
// the headers is drawn inside the viewport above it, no fold closed;
// the list offers it only for the short one, the letters' own pages for
// all but the largest, and the largest is never published.
func TestBrowserRedriveShowsAll(t *testing.T) {
	t.Parallel()
	chromium, npmDir := browserTools(t)
	r := newRig(t)
	js := r.srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	step := func(turnID string, pad int) []byte {
		return paddedStep(turnID, pad, map[string]string{"type": "function_call", "call_id": "tail", "name": "mark", "arguments": `{"label":"redriven-` + turnID + `"}`})
	}
	for _, l := range []struct {
		turn      string
		pad, hdrs int
	}{{"small", 0, 0}, {"mid", 8 << 10, 0}, {"hdrs", 0, 300}, {"big", 300 << 10, 0}} {
		dl := nats.NewMsg("turn.dead.a3." + l.turn)
		dl.Data = step(l.turn, l.pad)
		for h := range l.hdrs {
			dl.Header.Set("X-Trace-"+strings.Repeat("h", h%7)+string(rune('a'+h%26))+strings.Repeat("0", h/26), "v\u200b")
		}
		dl.Header.Set("Dead-Reason", "delivery limit reached: delivered 3 times")
		dl.Header.Set("Dead-Subject", "turn.call.a3."+l.turn)
		dl.Header.Set("Dead-Stream", "TURN_CALLS")
		dl.Header.Set("Dead-Nats-Msg-Id", "a3."+l.turn+".0")
		if _, err := js.PublishMsg(ctx, dl); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := r.srv.Connect(t).SubscribeSync("turn.call.a3.*")
	if err != nil {
		t.Fatal(err)
	}
	outb := runBrowser(ctx, t, "redrive.mjs", r.url, npmDir, chromium)
	var res struct {
		ListButtons, ListNotes []string
		Pages                  map[string]bool
		Measure                struct {
			Chars, Undrawn, Outside, Below, Closed int
			Samples                                []string
		}
		Flashes []string
	}
	if err := json.Unmarshal(outb, &res); err != nil {
		t.Fatalf("browser script output %q: %v", outb, err)
	}
	if len(res.ListButtons) != 1 || len(res.ListNotes) != 3 {
		t.Errorf("the list offers re-drives for letters %v (want the short one alone), notes for %v", res.ListButtons, res.ListNotes)
	}
	if m := res.Measure; m.Chars == 0 || m.Undrawn+m.Outside+m.Below+m.Closed > 0 {
		t.Errorf("beside a Re-drive button, of %d characters: %d not drawn, %d outside the viewport, %d below the button; %d folds closed: %q",
			m.Chars, m.Undrawn, m.Outside, m.Below, m.Closed, m.Samples)
	}
	offered := 0
	for _, ok := range res.Pages {
		if ok {
			offered++
		}
	}
	if offered != 3 {
		t.Errorf("the letters' own pages offer %d re-drives, want 3 (all but the one no page shows whole): %v", offered, res.Pages)
	}
	for _, f := range res.Flashes {
		if !strings.Contains(f, "re-driven on") {
			t.Errorf("flash %q", f)
		}
	}
	got := map[string]bool{}
	for range offered {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("re-driven steps: %v (got %v)", err, got)
		}
		got[m.Subject] = true
	}
	if got["turn.call.a3.big"] || len(got) != 3 {
		t.Errorf("published %v", got)
	}
}
