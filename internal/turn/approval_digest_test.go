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
