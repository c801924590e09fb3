package turn

import (
	"encoding/json"

	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// CallError is a tool's error as a call.output carries it; nil stays nil.
func CallError(e *tool.Error) *protocol.CallError {
	if e == nil {
		return nil
	}
	return &protocol.CallError{Kind: e.Kind, Message: e.Message}
}

// details is a tool's details encoded for a call.output; nil stays nil.
// Details that do not encode (a tool's bug) become an object saying why,
// so that the call's output is still published.
func details(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return mustJSON(map[string]string{"error": "the tool's details could not be encoded: " + err.Error()})
	}
	return b
}
