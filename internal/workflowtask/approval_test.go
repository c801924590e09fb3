package workflowtask_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// TestTaskTurnsAreNeverHeldForApproval: a task turn's catalog is fixed
// (read-only tools and submit_result), and its steps run as they come
// whatever the worker's approval policy or the step's context.approval
// says; a destructive tool a context names is not in the turn at all.
func TestTaskTurnsAreNeverHeldForApproval(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.approval = turn.Policy{Destructive: true, Names: []string{"recall", "submit_result"}}
	h.startWorker()
	wf, turns := h.startWorkflow(0, oneTask("q1"))
	ctx := taskContext(wf, "q1", "brain")
	ctx.Approval = protocol.ApprovalScope{Level: protocol.ApprovalAll}

	req, _ := json.Marshal(protocol.CatalogRequest{AgentID: agent, TurnID: turns["q1"], Context: ctx})
	m, err := h.nc.Request(protocol.SubjectTools, req, wait)
	if err != nil {
		t.Fatal(err)
	}
	var reply protocol.CatalogReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		t.Fatal(err)
	}
	if len(reply.Approval) != 0 {
		t.Errorf("a task turn's catalog lists tools needing approval: %v", reply.Approval)
	}

	se := h.runStep(protocol.PrefixTask, turns["q1"], 0, ctx,
		call("c1", "recall", map[string]any{"query": "x"}), call("c2", "forget", map[string]any{"query": "x"}),
		submit("c3", map[string]any{"answer": "42", "confidence": 0.9}))
	wantVerdict(t, se, protocol.VerdictAccepted, true)
	if se.calls["c1"].Status != protocol.StatusOK || se.calls["c3"].Status != protocol.StatusOK {
		t.Errorf("outputs %+v", se.calls)
	}
	if e := se.calls["c2"].Error; e == nil || e.Kind != tool.UnknownTool {
		t.Errorf("a destructive tool in a task turn: %+v", e)
	}
	// Nothing was held: no step.pending on the turn (the harness files
	// any event without a call id under "").
	if e, ok := se.calls[""]; ok {
		t.Errorf("unexpected event %+v", e)
	}
	if m, err := h.outputs[turns["q1"]].c.Next(jetstream.FetchMaxWait(300 * time.Millisecond)); err == nil {
		t.Errorf("unexpected event %s", m.Data())
	}
}
