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
	"github.com/agentbull/toolruntime/protocol"
)

// A page of large held steps (an agent's twelve turns, each holding a
// call with 100 KB of arguments: a record of about 200 KB, kept raw and
// validated) costs a repeat load of /approvals less than one of its
// records (a page of small steps costs 30 to 80 KiB): the list reads a
// record again only when it changed, and learns the newest record's
// sequence (to know its watch is in step) from its headers alone (read
// whole, it cost every load one record more). Read whole at every load, the twelve
// records were 2.4 MB from NATS a load (twenty of a worker's largest,
// 1 MB each, took /approvals from 69 to 615 ms). Each step is still
// listed clipped, with no Approve on the list, and one approved from
// its own page runs with its arguments whole.
func TestLargeHeldStepsReadOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const steps = 12
	note := strings.Repeat("x", 100<<10) + " TAIL"
	var first *gateway.StepRun
	for i := range steps {
		args, _ := json.Marshal(map[string]string{"note": note})
		run, err := r.gw.Send(ctx, protocol.Step{AgentID: "a1", TurnID: fmt.Sprintf("t%d", i), Step: 0, Context: diagCtx,
			Output: []json.RawMessage{fc("c1", "ping", string(args))}})
		if err != nil {
			t.Fatal(err)
		}
		defer run.Close()
		if _, err := run.Next(ctx); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = run
		}
	}
	c, csrf := r.login(t)
	// A load reads each record it has not read (within the page's 10 s:
	// on a loaded machine under the race detector, some are left to the
	// next load).
	for range 10 {
		if strings.Count(get(t, c, r.url+"/approvals", http.StatusOK), `<section class="step"`) == steps {
			break
		}
	}
	in := r.consoleNC.Stats().InBytes
	page := get(t, c, r.url+"/approvals", http.StatusOK)
	read := r.consoleNC.Stats().InBytes - in
	record := 2 * len(note) // kept raw and validated
	t.Logf("a repeat load of /approvals read %d KiB from NATS beside %d held steps of %d KiB records", read>>10, steps, record>>10)
	if read > uint64(record) {
		t.Errorf("a repeat load read %d KiB beside %d held steps of %d KiB records: the records are read again", read>>10, steps, record>>10)
	}
	if n := strings.Count(page, `<section class="step"`); n != steps {
		t.Errorf("%d steps listed, want %d", n, steps)
	}
	if strings.Contains(page, `value="approve"`) || strings.Count(page, `class="open-step"`) != steps || strings.Contains(page, "TAIL") {
		t.Error("a step whose arguments the list clips is offered Approve there, or shown whole")
	}
	// Approved from its own page, which reads the record whole.
	v := r.digests(t, c, "a1", "t0", url.Values{"csrf": {csrf}, "agent_id": {"a1"}, "turn_id": {"t0"}, "step": {"0"}, "call.0": {"c1"}})
	step := get(t, c, r.url+"/approvals/step?agent=a1&turn=t0&step=0", http.StatusOK)
	if !strings.Contains(step, "TAIL") || !strings.Contains(step, `value="approve"`) {
		t.Fatal("the step's own page does not show it whole with Approve")
	}
	v.Set("back", "step")
	v.Set("decision.0", "approve")
	if code := r.post(t, c, "/approvals/decide", v); code != http.StatusSeeOther {
		t.Fatalf("decide: %d", code)
	}
	done, err := first.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var item struct{ Output string }
	_ = json.Unmarshal(done.Items[0], &item)
	if item.Output != "pong "+note {
		t.Errorf("the approved call ran with %d bytes of output, not its note whole", len(item.Output))
	}
}
