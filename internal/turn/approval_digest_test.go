package turn_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// A decision whose digest is not the held call's is refused (the step
// stays held); the held call's digest, or none, decides it.
func TestDecideChecksTheDigest(t *testing.T) {
	p := &turn.PendingStep{AgentID: "a1", TurnID: "t1", Step: 2, State: turn.StatePending, Calls: []turn.HeldCall{
		{CallID: "c1", Name: "run_command", Valid: json.RawMessage(`{"command":"touch PWNED-bidi"}`), Approval: "named"},
	}}
	shown := protocol.DecisionDigest("c1", "", "run_command", []byte("{\"command\":\"true # \u202eidib-DENWP hcuot\"}"))
	held := protocol.DecisionDigest("c1", "", "run_command", p.Calls[0].Valid)
	err := p.Decide(&protocol.Approval{Decisions: []protocol.Decision{{CallID: "c1", Approved: true, Digest: shown}}})
	if !errors.Is(err, turn.ErrApproval) || !strings.Contains(err.Error(), "other arguments than those that would run") {
		t.Fatalf("a decision on another value: %v", err)
	}
	for _, d := range []string{held, ""} {
		if err := p.Decide(&protocol.Approval{Decisions: []protocol.Decision{{CallID: "c1", Approved: true, Digest: d}}}); err != nil {
			t.Errorf("digest %q: %v", d, err)
		}
	}
}

// A decision carrying the step-bound digest decides only the hold it was
// made for: the same call id and arguments held in another agent's,
// turn's or step's record, or asked again in a later round, refuse it;
// the call-only digest (gateways of before the step-bound one) still
// decides.
func TestDecideChecksTheStepDigest(t *testing.T) {
	args := json.RawMessage(`{"command":"rm -rf build"}`)
	held := func(agent, turnID string, step int64, round int) *turn.PendingStep {
		return &turn.PendingStep{AgentID: agent, TurnID: turnID, Step: step, Round: round, State: turn.StatePending, StepDigest: true,
			Calls: []turn.HeldCall{{CallID: "call_1", Name: "run_command", Valid: args, Approval: "named"}}}
	}
	decide := func(p *turn.PendingStep, digest string) error {
		return p.Decide(&protocol.Approval{AgentID: p.AgentID, TurnID: p.TurnID, Step: p.Step,
			Decisions: []protocol.Decision{{CallID: "call_1", Approved: true, Digest: digest}}})
	}
	shown := protocol.StepDecisionDigest("a1", "t1", 2, 1, "call_1", "", "run_command", args)
	if err := decide(held("a1", "t1", 2, 0), shown); err != nil {
		t.Fatalf("the hold's own step-bound digest: %v", err)
	}
	if err := decide(held("a1", "t1", 2, 0), protocol.DecisionDigest("call_1", "", "run_command", args)); err != nil {
		t.Fatalf("the call-only digest: %v", err)
	}
	for name, p := range map[string]*turn.PendingStep{
		"another agent": held("a2", "t1", 2, 0), "another turn": held("a1", "t2", 2, 0),
		"another step": held("a1", "t1", 3, 0), "a later round": held("a1", "t1", 2, 2),
	} {
		if err := decide(p, shown); !errors.Is(err, turn.ErrApproval) || !strings.Contains(err.Error(), "or on another hold") {
			t.Errorf("%s: a decision made for a1/t1 step 2 round 1: %v", name, err)
		}
	}
}
