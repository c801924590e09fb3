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

// A page of held steps whose records are as large as a worker keeps
// (an agent's twenty turns, each holding a call with 160 KB of
// arguments: a record of about 330 KB) costs a repeat load of /approvals
// what the same page of twenty small steps costs, and one record more
// (the newest, which each load reads to know the watch is in step): the
// list reads a record again only when it changed. Read whole at every load, the
// twenty records were 6.5 MB from NATS a load (twenty of a worker's
// largest, 20 MB, took /approvals from 69 to 615 ms). Each step is still
// listed clipped, with no Approve on the list, and one approved from its
// own page runs with its arguments whole.
func TestLargeHeldStepsReadOnce(t *testing.T) {
	t.Parallel()
	big, small := newRig(t), newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	note := strings.Repeat("x", 160<<10) + " TAIL"
	var first *gateway.StepRun
	for i := range 20 {
		for _, r := range []*rig{big, small} {
			n := note
			if r == small {
				n = "short"
			}
			args, _ := json.Marshal(map[string]string{"note": n})
			run, err := r.gw.Send(ctx, protocol.Step{AgentID: "a1", TurnID: fmt.Sprintf("t%d", i), Step: 0, Context: diagCtx,
				Output: []json.RawMessage{fc("c1", "ping", string(args))}})
			if err != nil {
				t.Fatal(err)
			}
			defer run.Close()
			if _, err := run.Next(ctx); err != nil {
				t.Fatal(err)
			}
			if r == big && i == 0 {
				first = run
			}
		}
	}
	c, csrf := big.login(t) // the first load reads every record once
	sc, _ := small.login(t)
	load := func(r *rig, c *http.Client) (string, uint64) {
		in := r.consoleNC.Stats().InBytes
		page := get(t, c, r.url+"/approvals", http.StatusOK)
		return page, r.consoleNC.Stats().InBytes - in
	}
	page, bigRead := load(big, c)
	_, smallRead := load(small, sc)
	t.Logf("a repeat load of /approvals read %d KiB from NATS beside twenty held steps of 160 KB, %d KiB beside twenty small ones", bigRead>>10, smallRead>>10)
	// A load reads the newest approval record (to know that the watch
	// has seen it): one record, not twenty.
	if bigRead > smallRead+400<<10 {
		t.Errorf("a repeat load read %d KiB beside twenty large held steps, %d KiB beside twenty small ones: the records are read again", bigRead>>10, smallRead>>10)
	}
	if n := strings.Count(page, `<section class="step"`); n != 20 {
		t.Errorf("%d steps listed, want 20", n)
	}
	if strings.Contains(page, `value="approve"`) || strings.Count(page, `class="open-step"`) != 20 || strings.Contains(page, "TAIL") {
		t.Error("a step whose arguments the list clips is offered Approve there, or shown whole")
	}
	// Approved from its own page, which reads the record whole.
	v := big.digests(t, c, "a1", "t0", url.Values{"csrf": {csrf}, "agent_id": {"a1"}, "turn_id": {"t0"}, "step": {"0"}, "call.0": {"c1"}})
	step := get(t, c, big.url+"/approvals/step?agent=a1&turn=t0&step=0", http.StatusOK)
	if !strings.Contains(step, "TAIL") || !strings.Contains(step, `value="approve"`) {
		t.Fatal("the step's own page does not show it whole with Approve")
	}
	v.Set("back", "step")
	v.Set("decision.0", "approve")
	if code := big.post(t, c, "/approvals/decide", v); code != http.StatusSeeOther {
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
