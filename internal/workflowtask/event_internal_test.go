package workflowtask

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/wire"
	"github.com/agentbull/toolruntime/protocol"
)

// A workflow event over the budget keeps its result and clips its texts;
// one whose result alone is over is refused as too large.
func TestEventFit(t *testing.T) {
	t.Parallel()
	const budget = 64 << 10
	ev := &protocol.WorkflowEvent{Type: protocol.EventWorkflowCancelled, WorkflowID: "w", Title: strings.Repeat("t", 5000),
		Instructions: strings.Repeat("i", 200<<10), Reason: strings.Repeat("r", 600<<10), Result: json.RawMessage(`{"ok":true}`)}
	if err := wire.FitWorkflowEvent(ev, budget); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(ev)
	if len(data) > budget || string(ev.Result) != `{"ok":true}` {
		t.Errorf("%d bytes, result %s", len(data), ev.Result)
	}
	for _, s := range []string{ev.Title, ev.Instructions, ev.Reason} {
		if !strings.Contains(s, "bytes left out") {
			t.Errorf("not clipped with a note: %.80q", s)
		}
	}
	big := &protocol.WorkflowEvent{Type: protocol.EventTaskAccepted, WorkflowID: "w", Result: json.RawMessage(`"` + strings.Repeat("x", budget) + `"`)}
	if err := wire.FitWorkflowEvent(big, budget); !errors.Is(err, wire.ErrTooLarge) {
		t.Errorf("a result over the budget: %v", err)
	}
}
