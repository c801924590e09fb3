package gateway

import (
	"encoding/json"

	"github.com/agentbull/toolruntime/protocol"
)

// Step is one model response of a turn, as the gateway publishes it.
type Step struct {
	AgentID string
	TurnID  string
	// Step numbers the model responses of a turn: 0, 1, 2, …
	Step int64
	// Context is the turn's context; its Kind decides the subject
	// (turn.call for a main turn, turn.task for a task turn).
	Context protocol.Context
	// Output is the model response's output array, item by item, as the
	// provider returned it: messages, reasoning, function_call and
	// tool_search_call items alike.
	Output []json.RawMessage
}
