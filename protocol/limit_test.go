package protocol_test

import (
	"encoding/json"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

// MinStepDoneBytes counts the step.done of a step without calls as
// json.Marshal writes it, whatever the ids hold and however long the step
// number.
func TestMinStepDoneBytesIsMarshal(t *testing.T) {
	for _, id := range []string{"a", "agent-1_X", "<&>", "\"\\", "\x00\x1f", "é\u2028", "\xff"} {
		for _, step := range []int64{0, 7, 1234567, -3, 1<<63 - 1} {
			st := &protocol.Step{AgentID: id, TurnID: id + "t", Step: step}
			want, _ := json.Marshal(protocol.StepDone{Type: protocol.EventStepDone, AgentID: st.AgentID, TurnID: st.TurnID, Step: st.Step, Items: []json.RawMessage{}})
			if got := protocol.MinStepDoneBytes(st); got != len(want) {
				t.Fatalf("MinStepDoneBytes(%q, %d) = %d, json.Marshal writes %d bytes: %s", id, step, got, len(want), want)
			}
		}
	}
}
