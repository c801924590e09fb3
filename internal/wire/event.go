package wire

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

// Marshal writes v as json.Marshal does, byte for byte. Every step
// publishes a call.output per call and a step.done, and two activities
// per call, and json.Marshal's reflection over them was a thirtieth of a
// no-op step's CPU: those are written here, field by field, in the order
// of their struct tags, and anything else (or a field this does not
// write: presentation events, a task verdict, progress, raw JSON with
// HTML characters) goes through json.Marshal.
func Marshal(v any) ([]byte, error) { return Append(nil, v) }

// Append appends v to b as Marshal writes it.
func Append(b []byte, v any) ([]byte, error) {
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
	case protocol.Activity:
		return appendActivity(b, v)
	case *protocol.AuthRequiredEvent:
		if v != nil {
			return appendAuthRequired(b, v), nil
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
	b = AppendString(append(b, `{"type":`...), ev.Type)
	b = AppendString(append(b, `,"agent_id":`...), ev.AgentID)
	b = AppendString(append(b, `,"turn_id":`...), ev.TurnID)
	b = strconv.AppendInt(append(b, `,"step":`...), ev.Step, 10)
	b = AppendString(append(b, `,"call_id":`...), ev.CallID)
	b = AppendString(append(b, `,"name":`...), ev.Name)
	b = AppendString(append(b, `,"namespace":`...), ev.Namespace)
	b = AppendString(append(b, `,"status":`...), ev.Status)
	b = append(b, `,"error":`...)
	if ev.Error == nil {
		b = append(b, "null"...)
	} else {
		b = AppendString(append(b, `{"kind":`...), string(ev.Error.Kind))
		b = append(AppendString(append(b, `,"message":`...), ev.Error.Message), '}')
	}
	var ok bool
	if b, ok = AppendRaw(append(b, `,"item":`...), ev.Item); !ok {
		return nil, false
	}
	if b, ok = AppendRaw(append(b, `,"details":`...), ev.Details); !ok {
		return nil, false
	}
	b = append(b, `,"events":`...)
	if ev.Events == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, "[]"...)
	}
	b = AppendStrings(append(b, `,"repairs":`...), ev.Repairs)
	b = AppendString(append(b, `,"activity":`...), ev.Activity)
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
	b = AppendString(append(b, `{"type":`...), ev.Type)
	b = AppendString(append(b, `,"agent_id":`...), ev.AgentID)
	b = AppendString(append(b, `,"turn_id":`...), ev.TurnID)
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
			if b, ok = AppendRaw(b, it); !ok {
				return nil, false
			}
		}
		b = append(b, ']')
	}
	b = strconv.AppendBool(append(b, `,"end_turn":`...), ev.EndTurn)
	b = strconv.AppendBool(append(b, `,"complete_actor_event":`...), ev.CompleteActorEvent)
	return append(b, `,"task":null}`...), true
}

// AppendActivity appends a to b as Marshal writes it, within budget
// bytes: an activity over it has its label, name and call id clipped to
// a quarter of the budget each (textclip.Text), and one still over is
// refused (ErrTooLarge). Losing an activity is harmless; a label that
// does not fit is clipped rather than lost.
func AppendActivity(b []byte, a protocol.Activity, budget int) ([]byte, error) {
	start := len(b)
	out, err := appendActivity(b, a)
	if err != nil || len(out)-start <= budget {
		return out, err
	}
	a.Label, a.Name, a.CallID = textclip.Text(a.Label, budget/4), textclip.Text(a.Name, budget/4), textclip.Text(a.CallID, budget/4)
	if out, err = appendActivity(out[:start], a); err == nil && len(out)-start > budget {
		err = fmt.Errorf("%w: activity of %d bytes, over %d", ErrTooLarge, len(out)-start, budget)
	}
	return out, err
}

// appendActivity appends a as Marshal writes it: progress events go
// through json.Marshal.
func appendActivity(b []byte, a protocol.Activity) ([]byte, error) {
	if a.Progress != nil {
		data, err := json.Marshal(a)
		if b == nil {
			return data, err
		}
		return append(b, data...), err
	}
	b = slices.Grow(b, len(a.CallID)+len(a.Name)+len(a.State)+len(a.Label)+48)
	b = AppendString(append(b, `{"call_id":`...), a.CallID)
	b = AppendString(append(b, `,"name":`...), a.Name)
	b = AppendString(append(b, `,"state":`...), a.State)
	b = AppendString(append(b, `,"label":`...), a.Label)
	return append(b, '}'), nil
}

// appendAuthRequired writes an auth.required event (protocol 1.3).
func appendAuthRequired(b []byte, ev *protocol.AuthRequiredEvent) []byte {
	b = AppendString(append(b, `{"type":`...), ev.Type)
	b = AppendString(append(b, `,"agent_id":`...), ev.AgentID)
	b = AppendString(append(b, `,"turn_id":`...), ev.TurnID)
	b = strconv.AppendInt(append(b, `,"step":`...), ev.Step, 10)
	b = AppendString(append(b, `,"call_id":`...), ev.CallID)
	b = AppendString(append(b, `,"server":`...), ev.Server)
	b = AppendString(append(b, `,"url":`...), ev.URL)
	return append(b, '}')
}
