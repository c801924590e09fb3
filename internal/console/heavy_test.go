package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/console"
	"github.com/agentbull/toolruntime/protocol"
)

// heavyNote is n bytes of characters that are each a marker on the page
// and never two alike in a row (no run to count): Cyrillic letters and
// zero-width characters in turn, some 25 bytes of page per byte.
func heavyNote(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteRune(rune(0x0430 + i%32))
		b.WriteRune(rune(0x200B + i%3))
	}
	return b.String()
}

// One agent holds steps whose arguments weigh twenty times their bytes
// on a page (a marker for each character); another agent holds an
// ordinary step beside them. The list stays bounded in bytes and still
// offers the quiet agent's Approve; a heavy step's own page is bounded
// too, says that it is not shown whole, offers no Approve, and the
// console refuses an approval for it (nothing runs), while its
// rejection goes through and the quiet agent's approval runs.
func TestHeavyArgumentsBounded(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	// The bounds scaled down (2 MiB and 8 MiB in use) with the values.
	console.SetPageBounds(r.console, 64<<10, 256<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	note, _ := json.Marshal(map[string]string{"note": heavyNote(12 << 10)})
	const heavy, calls = 3, 4
	runs := make([]*gateway.StepRun, heavy)
	for i := range heavy {
		var out []json.RawMessage
		for c := range calls {
			out = append(out, fc(fmt.Sprintf("c%d", c), "ping", string(note)))
		}
		run, err := r.gw.Send(ctx, protocol.Step{AgentID: "heavy", TurnID: fmt.Sprintf("h%d", i), Step: 0, Context: diagCtx, Output: out})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(run.Close)
		if ev, err := run.Next(ctx); err != nil {
			t.Fatal(err)
		} else if _, ok := ev.(*protocol.StepPending); !ok {
			t.Fatalf("heavy step %d: %T, want a step.pending", i, ev)
		}
		runs[i] = run
	}
	quiet := r.hold(t, "quiet", "q1")
	c, csrf := r.login(t)

	list := get(t, c, r.url+"/approvals", http.StatusOK)
	t.Logf("/approvals: %d bytes for %d held steps of %d calls of %d bytes", len(list), heavy, calls, len(note))
	if len(list) > 256<<10 {
		t.Errorf("/approvals is %d bytes", len(list))
	}
	sections := strings.Split(list, `<section class="step"`)[1:]
	for _, sec := range sections {
		approve := strings.Count(sec, `class="approve"`)
		switch {
		case strings.Contains(sec, `data-agent="quiet"`):
			if approve != 2 {
				t.Errorf("the quiet agent's step offers %d approvals beside the heavy steps, want 2", approve)
			}
		case approve != 0 || !strings.Contains(sec, "open the step"):
			t.Errorf("a heavy step on the list offers %d approvals, open link %v", approve, strings.Contains(sec, "open the step"))
		}
	}

	stepURL := r.url + "/approvals/step?agent=heavy&turn=h0&step=0"
	one := get(t, c, stepURL, http.StatusOK)
	t.Logf("a heavy step's page: %d bytes", len(one))
	if len(one) > 512<<10 {
		t.Errorf("a heavy step's page is %d bytes", len(one))
	}
	if !strings.Contains(one, `id="too-large"`) || strings.Contains(one, `class="approve"`) {
		t.Errorf("a heavy step's page: too-large note %v, approve offered %v", strings.Contains(one, `id="too-large"`), strings.Contains(one, `class="approve"`))
	}
	form := url.Values{"csrf": {csrf}, "agent_id": {"heavy"}, "turn_id": {"h0"}, "step": {"0"}, "back": {"step"}}
	for _, m := range digestField.FindAllStringSubmatch(one, -1) {
		form.Set("digest."+m[1], m[2])
		form.Set("call."+m[1], "c"+m[1])
		form.Set("decision."+m[1], "approve")
	}
	form.Set("shown", shownField.FindStringSubmatch(one)[1])
	if len(form) != 6+3*calls {
		t.Fatalf("the step's page has %d fields for %d calls", len(form), calls)
	}
	if code := r.post(t, c, "/approvals/decide", form); code != http.StatusSeeOther {
		t.Fatalf("decide: %d", code)
	}
	if page := get(t, c, stepURL, http.StatusOK); !strings.Contains(page, "weighs more than one page shows whole") {
		t.Errorf("an approval of a step not shown whole was not refused")
	}
	for i := range calls {
		form.Set(fmt.Sprintf("decision.%d", i), "reject")
	}
	if code := r.post(t, c, "/approvals/decide", form); code != http.StatusSeeOther {
		t.Fatalf("decide: %d", code)
	}
	done, err := runs[0].Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range done.Items {
		if strings.Contains(string(it), "pong") {
			t.Fatalf("a call of the heavy step ran: %.200s", it)
		}
	}
	qform := r.digests(t, c, "quiet", "q1", url.Values{"csrf": {csrf}, "agent_id": {"quiet"}, "turn_id": {"q1"}, "step": {"0"},
		"call.0": {"c1"}, "decision.0": {"approve"}, "call.1": {"c2"}, "decision.1": {"approve"}})
	if code := r.post(t, c, "/approvals/decide", qform); code != http.StatusSeeOther {
		t.Fatalf("decide: %d", code)
	}
	if _, err := quiet.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if m := marks(t, r.markDir); len(m) != 1 || m[0] != "deploy" {
		t.Errorf("the quiet agent's approval: marks %v", m)
	}
}
