package fit

import (
	"encoding/json"

	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Error is a tool's error as a call.output carries it; nil stays nil.
func Error(e *tool.Error) *protocol.CallError {
	if e == nil {
		return nil
	}
	return &protocol.CallError{Kind: e.Kind, Message: e.Message}
}

// Details is a tool's details encoded for a call.output; nil stays nil.
// Details that do not encode (a tool's bug) become an object saying why,
// so that the call's output is still published.
func Details(v any) json.RawMessage {
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

// Events are a tool's presentation events as a call.output carries them;
// nil stays nil. Data that does not encode is replaced as in Details.
func Events(evs []tool.PresentationEvent) []protocol.PresentationEvent {
	if evs == nil {
		return nil
	}
	out := make([]protocol.PresentationEvent, len(evs))
	for i, e := range evs {
		out[i] = protocol.PresentationEvent{Type: e.Type, Data: Details(e.Data)}
	}
	return out
}

// ToolEvents turns events back into the tool's type (for the journal,
// after CallOutput clipped them); their data stays encoded.
func ToolEvents(evs []protocol.PresentationEvent) []tool.PresentationEvent {
	if evs == nil {
		return nil
	}
	out := make([]tool.PresentationEvent, len(evs))
	for i, e := range evs {
		out[i] = tool.PresentationEvent{Type: e.Type}
		if len(e.Data) > 0 {
			out[i].Data = e.Data
		}
	}
	return out
}
