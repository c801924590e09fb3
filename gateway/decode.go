package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentbull/toolruntime/protocol"
)

// EventError is a message on a turn's subjects that is not a valid
// event: not JSON, of the wrong shape, or about another turn. It is
// reported and skipped; the step goes on.
type EventError struct {
	Subject string
	// Reason says what is wrong.
	Reason string
}

// Error says where the event came from and what is wrong with it.
func (e *EventError) Error() string {
	return fmt.Sprintf("bad event on %s: %s", e.Subject, e.Reason)
}

// ErrUnknownEvent is wrapped by the error of an event whose type this
// client does not know (a later protocol version's); such events are
// skipped.
var ErrUnknownEvent = errors.New("unknown event type")

// DecodeEvent decodes a message that arrived on a turn's output subject
// (turn.call.output.<agent_id>.<turn_id>: call.output, step.done,
// step.pending) or activity subject (turn.activity.<agent_id>.<turn_id>).
// Anything else, including an event whose ids disagree with the subject,
// is an *EventError; an event of an unknown type wraps ErrUnknownEvent.
func DecodeEvent(subject string, data []byte) (protocol.Event, error) {
	bad := func(format string, args ...any) (protocol.Event, error) {
		return nil, &EventError{Subject: subject, Reason: fmt.Sprintf(format, args...)}
	}
	kind, agentID, turnID, ok := splitTurnSubject(subject)
	if !ok {
		return bad("not a turn output or activity subject")
	}
	if kind == protocol.PrefixActive {
		var a protocol.Activity
		if err := json.Unmarshal(data, &a); err != nil {
			return bad("not an activity object: %v", err)
		}
		switch {
		case !protocol.ValidCallID(a.CallID):
			return bad("call_id is not 1-256 printable characters")
		case a.State != protocol.ActivityStarted && a.State != protocol.ActivityCompleted && a.State != protocol.ActivityProgress:
			return bad("state %q is not started, progress or completed", a.State)
		case a.State == protocol.ActivityProgress && a.Progress == nil:
			return bad("a progress activity without progress")
		}
		return &a, nil
	}
	var head struct {
		Type    string `json:"type"`
		AgentID string `json:"agent_id"`
		TurnID  string `json:"turn_id"`
		Step    *int64 `json:"step"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return bad("not a JSON event object: %v", err)
	}
	switch {
	case head.AgentID != agentID || head.TurnID != turnID:
		return bad("ids %q.%q disagree with the subject", head.AgentID, head.TurnID)
	case head.Step == nil || *head.Step < 0:
		return bad("step is missing or negative")
	}
	switch head.Type {
	case protocol.EventCallOutput:
		var o protocol.CallOutput
		if err := json.Unmarshal(data, &o); err != nil {
			return bad("call.output: %v", err)
		}
		switch {
		case !protocol.ValidCallID(o.CallID):
			return bad("call.output: call_id is not 1-256 printable characters")
		case o.Status != protocol.StatusOK && o.Status != protocol.StatusError:
			return bad("call.output: status %q is neither ok nor error", o.Status)
		case o.Status == protocol.StatusError && o.Error == nil:
			return bad("call.output: status error without an error")
		case !isObject(o.Item):
			return bad("call.output: item is not an object")
		}
		return &o, nil
	case protocol.EventStepDone:
		var d protocol.StepDone
		if err := json.Unmarshal(data, &d); err != nil {
			return bad("step.done: %v", err)
		}
		if d.Items == nil {
			return bad("step.done: items is missing")
		}
		for i, it := range d.Items {
			if !isObject(it) {
				return bad("step.done: items[%d] is not an object", i)
			}
		}
		return &d, nil
	case protocol.EventAuthRequired:
		var a protocol.AuthRequiredEvent
		if err := json.Unmarshal(data, &a); err != nil {
			return bad("auth.required: %v", err)
		}
		if !protocol.ValidCallID(a.CallID) {
			return bad("auth.required: call_id is not 1-256 printable characters")
		}
		return &a, nil
	case protocol.EventStepPending:
		var p protocol.StepPending
		if err := json.Unmarshal(data, &p); err != nil {
			return bad("step.pending: %v", err)
		}
		if len(p.Approvals) == 0 {
			return bad("step.pending: no approvals")
		}
		for i, a := range p.Approvals {
			if !protocol.ValidCallID(a.CallID) {
				return bad("step.pending: approvals[%d]: call_id is not 1-256 printable characters", i)
			}
		}
		return &p, nil
	}
	return nil, &eventTypeError{EventError{Subject: subject, Reason: fmt.Sprintf("%v %q", ErrUnknownEvent, head.Type)}}
}

// eventTypeError is an *EventError that also is ErrUnknownEvent.
type eventTypeError struct{ EventError }

func (e *eventTypeError) Unwrap() []error { return []error{&e.EventError, ErrUnknownEvent} }

// splitTurnSubject splits turn.call.output.<a>.<t> and
// turn.activity.<a>.<t>.
func splitTurnSubject(subject string) (prefix, agentID, turnID string, ok bool) {
	for _, p := range []string{protocol.PrefixOutput, protocol.PrefixActive} {
		rest, found := strings.CutPrefix(subject, p+".")
		if !found {
			continue
		}
		a, t, two := strings.Cut(rest, ".")
		if two && protocol.ValidID(a) && protocol.ValidID(t) {
			return p, a, t, true
		}
	}
	return "", "", "", false
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}
