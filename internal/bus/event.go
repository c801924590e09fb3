package bus

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/agentbull/toolruntime/internal/wire"
	"github.com/agentbull/toolruntime/protocol"
)

// marshalEvent writes v as json.Marshal does, byte for byte. Every step
// publishes a call.output per call and a step.done, and json.Marshal's
// reflection over them was a thirtieth of a no-op step's CPU: those two
// are written here, field by field, in the order of their struct tags,
// and anything else (or a field this does not write: presentation events,
// a task verdict, raw JSON with HTML characters) goes through json.Marshal.
func marshalEvent(v any) ([]byte, error) { return appendEvent(nil, v) }

// appendEvent appends v to b as marshalEvent writes it.
func appendEvent(b []byte, v any) ([]byte, error) {
	var (
		out []byte
		ok  bool
	)
	switch v := v.(type) {
	case *protocol.CallOutput:
		if v != nil {
			out, ok = appendCallOutput(b, v)
		}
	case *protocol.StepDone:
		if v != nil {
			out, ok = appendStepDone(b, v)
		}
	}
	if ok {
		return out, nil
	}
	data, err := json.Marshal(v)
	if b == nil {
		return data, err
	}
	return append(b, data...), err
}

func appendCallOutput(b []byte, ev *protocol.CallOutput) ([]byte, bool) {
	if len(ev.Events) > 0 {
		return nil, false
	}
	b = slices.Grow(b, 256+len(ev.AgentID)+len(ev.TurnID)+len(ev.CallID)+len(ev.Name)+len(ev.Namespace)+len(ev.Item)+len(ev.Details)+len(ev.Activity))
	b = wire.AppendString(append(b, `{"type":`...), ev.Type)
	b = wire.AppendString(append(b, `,"agent_id":`...), ev.AgentID)
	b = wire.AppendString(append(b, `,"turn_id":`...), ev.TurnID)
	b = strconv.AppendInt(append(b, `,"step":`...), ev.Step, 10)
	b = wire.AppendString(append(b, `,"call_id":`...), ev.CallID)
	b = wire.AppendString(append(b, `,"name":`...), ev.Name)
	b = wire.AppendString(append(b, `,"namespace":`...), ev.Namespace)
	b = wire.AppendString(append(b, `,"status":`...), ev.Status)
	b = append(b, `,"error":`...)
	if ev.Error == nil {
		b = append(b, "null"...)
	} else {
		b = wire.AppendString(append(b, `{"kind":`...), string(ev.Error.Kind))
		b = append(wire.AppendString(append(b, `,"message":`...), ev.Error.Message), '}')
	}
	var ok bool
	if b, ok = wire.AppendRaw(append(b, `,"item":`...), ev.Item); !ok {
		return nil, false
	}
	if b, ok = wire.AppendRaw(append(b, `,"details":`...), ev.Details); !ok {
		return nil, false
	}
	b = append(b, `,"events":`...)
	if ev.Events == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, "[]"...)
	}
	b = wire.AppendStrings(append(b, `,"repairs":`...), ev.Repairs)
	b = wire.AppendString(append(b, `,"activity":`...), ev.Activity)
	b = strconv.AppendInt(append(b, `,"duration_ms":`...), ev.DurationMS, 10)
	return append(b, '}'), true
}

func appendStepDone(b []byte, ev *protocol.StepDone) ([]byte, bool) {
	if ev.Task != nil {
		return nil, false
	}
	n := 160 + len(ev.AgentID) + len(ev.TurnID)
	for _, it := range ev.Items {
		n += len(it) + 1
	}
	b = slices.Grow(b, n)
	b = wire.AppendString(append(b, `{"type":`...), ev.Type)
	b = wire.AppendString(append(b, `,"agent_id":`...), ev.AgentID)
	b = wire.AppendString(append(b, `,"turn_id":`...), ev.TurnID)
	b = strconv.AppendInt(append(b, `,"step":`...), ev.Step, 10)
	b = append(b, `,"items":`...)
	if ev.Items == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, it := range ev.Items {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = wire.AppendRaw(b, it); !ok {
				return nil, false
			}
		}
		b = append(b, ']')
	}
	b = strconv.AppendBool(append(b, `,"end_turn":`...), ev.EndTurn)
	b = strconv.AppendBool(append(b, `,"complete_actor_event":`...), ev.CompleteActorEvent)
	return append(b, `,"task":null}`...), true
}
