package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Turn kinds carried in Context.Kind.
const (
	KindText         = "text"
	KindWorkflowTask = "workflow_task"
)

// Context is what a turn's tool set is assembled from.
type Context struct {
	Kind       string          `json:"kind"`
	Bindings   map[string]bool `json:"bindings,omitempty"`
	Skills     []string        `json:"skills,omitempty"`
	MCPServers []string        `json:"mcp_servers,omitempty"`
	WorkflowID string          `json:"workflow_id,omitempty"`
	TaskID     string          `json:"task_id,omitempty"`
	// Approval (protocol 1.1) adds to the calls the worker holds for a
	// person's approval: "destructive", "all" or a list of names.
	Approval ApprovalScope `json:"approval,omitzero"`
	// Fairness (protocol 1.2) names the share of the fleet the step draws
	// from: by default the agent's own, weight 1.
	Fairness Fairness `json:"fairness,omitzero"`
}

// Bound reports whether the context binds name (web, brain, …).
func (c Context) Bound(name string) bool { return c.Bindings[name] }

// Step is one model response of a turn, as the gateway publishes it on
// turn.call.<agent_id>.<turn_id> (a main turn) or turn.task.… (a task
// turn). A gateway fills the wire fields and sends it
// (gateway.Client.Send); ParseStep reads the message back into the fields
// the worker runs from (Items, Calls, Prose).
type Step struct {
	AgentID string `json:"agent_id"`
	TurnID  string `json:"turn_id"`
	// Step numbers the model responses of a turn: 0, 1, 2, …
	Step int64 `json:"step"`
	// Context is the turn's context; its Kind decides the subject
	// (turn.call for a main turn, turn.task for a task turn).
	Context Context `json:"context"`
	// Output is the model response's output array, item by item, as the
	// provider returned it: messages, reasoning, function_call and
	// tool_search_call items alike. ParseStep does not keep it: it reads
	// it into the three fields below.
	Output []json.RawMessage `json:"output"`
	// Items is how many items the model's output held.
	Items int `json:"-"`
	// Calls are the executable items of the output, in order.
	Calls []CallItem `json:"-"`
	// Prose reports whether the output holds a message with text.
	Prose bool `json:"-"`
}

// Item types of the Responses API that the worker reads or writes.
const (
	ItemFunctionCall       = "function_call"
	ItemToolSearchCall     = "tool_search_call"
	ItemFunctionCallOutput = "function_call_output"
	ItemToolSearchOutput   = "tool_search_output"
	ItemMessage            = "message"
)

// CallItem is a function_call or tool_search_call item of a step.
type CallItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Arguments is the model's argument string (function_call).
	Arguments string `json:"-"`
	// Search is the tool search arguments object (tool_search_call).
	Search    json.RawMessage `json:"-"`
	Execution string          `json:"execution,omitempty"`
}

// ErrMalformed is wrapped by every error ParseStep returns, and by the
// error of a step gateway.Client.Send refuses to publish because the
// workers would dead-letter it; the message after it is the dead-letter
// reason.
var ErrMalformed = errors.New("malformed step")

// ValidID reports whether s is a valid agent, turn, workflow or task id:
// 1-64 characters of [A-Za-z0-9_-].
func ValidID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidCallID reports whether s is 1–256 printable characters.
func ValidCallID(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// ParseStep decodes and checks a step message that arrived on subject,
// whose first two tokens must be prefix ("turn.call" or "turn.task"). Any
// problem is an error wrapping ErrMalformed that names it.
func ParseStep(prefix, subject string, data []byte, maxBytes int) (*Step, error) {
	if maxBytes > 0 && len(data) > maxBytes {
		return nil, malformed("message is %d bytes, over the %d byte limit", len(data), maxBytes)
	}
	rest, ok := strings.CutPrefix(subject, prefix+".")
	agentID, turnID, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || strings.Contains(turnID, ".") {
		return nil, malformed("subject %q is not %s.<agent_id>.<turn_id>%s", subject, prefix, dottedID(data))
	}
	w, ok := scanStep(data)
	if !ok {
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, notAStep(data, err)
		}
	}
	switch {
	case w.Step == nil:
		return nil, malformed("step is missing")
	case w.Context == nil:
		return nil, malformed("context is missing")
	}
	s := Step{AgentID: w.AgentID, TurnID: w.TurnID, Step: *w.Step, Context: *w.Context, Items: len(w.Output)}
	switch {
	case !ValidID(s.AgentID):
		return nil, malformed("agent_id %q is not 1-64 characters of [A-Za-z0-9_-]", s.AgentID)
	case !ValidID(s.TurnID):
		return nil, malformed("turn_id %q is not 1-64 characters of [A-Za-z0-9_-]", s.TurnID)
	case s.Step < 0:
		return nil, malformed("step %d is negative", s.Step)
	case agentID != s.AgentID || turnID != s.TurnID:
		return nil, malformed("ids %s.%s disagree with subject %q", s.AgentID, s.TurnID, subject)
	case w.Output == nil:
		return nil, malformed("output is missing")
	}
	switch s.Context.Kind {
	case KindText, KindWorkflowTask:
	default:
		return nil, malformed("context.kind %q is neither %q nor %q", s.Context.Kind, KindText, KindWorkflowTask)
	}
	for _, id := range []string{s.Context.WorkflowID, s.Context.TaskID} {
		if id != "" && !ValidID(id) {
			return nil, malformed("workflow or task id %q is not 1-64 characters of [A-Za-z0-9_-]", id)
		}
	}
	seen := map[string]bool{}
	for i, item := range w.Output {
		switch item.Type {
		case ItemFunctionCall, ItemToolSearchCall:
		case ItemMessage:
			if len(item.Content) > 0 && !bytes.Equal(item.Content, []byte("null")) && !bytes.Equal(item.Content, []byte("[]")) {
				s.Prose = true
			}
			continue
		default:
			continue
		}
		if !ValidCallID(item.CallID) {
			return nil, malformed("output[%d]: call_id is not 1-256 printable characters", i)
		}
		if seen[item.CallID] {
			return nil, malformed("output[%d]: call_id %q appears twice", i, item.CallID)
		}
		seen[item.CallID] = true
		c := CallItem{Type: item.Type, CallID: item.CallID, Namespace: item.Namespace, Name: item.Name, Execution: item.Execution}
		if item.Type == ItemFunctionCall {
			if item.Name == "" {
				return nil, malformed("output[%d]: function_call without a name", i)
			}
			if args, ok := plainString(item.Arguments); ok {
				c.Arguments = args
			} else if len(item.Arguments) > 0 && !bytes.Equal(item.Arguments, []byte("null")) {
				if err := json.Unmarshal(item.Arguments, &c.Arguments); err != nil {
					return nil, malformed("output[%d]: arguments is not a string", i)
				}
			}
		} else {
			c.Search = item.Arguments
		}
		s.Calls = append(s.Calls, c)
	}
	return &s, nil
}

// plainString decodes raw, a JSON value, when it is a string that holds
// no escapes, control characters or invalid UTF-8: its bytes between the
// quotes are what json.Unmarshal decodes it to.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	v := raw[1 : len(raw)-1]
	for _, c := range v {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(v) {
		return "", false
	}
	return string(v), true
}

// dottedID names the id of a step whose subject has too many tokens
// because the id holds a dot: the gateway's mistake is the id, not the
// subject it built from it.
func dottedID(data []byte) string {
	var ids struct {
		AgentID string `json:"agent_id"`
		TurnID  string `json:"turn_id"`
	}
	if json.Unmarshal(data, &ids) != nil {
		return ""
	}
	for _, id := range []struct{ name, v string }{{"agent_id", ids.AgentID}, {"turn_id", ids.TurnID}} {
		if strings.Contains(id.v, ".") {
			return fmt.Sprintf(": %s %q is not 1-64 characters of [A-Za-z0-9_-]", id.name, id.v)
		}
	}
	return ""
}

// notAStep says why data, which json.Unmarshal refused with err, is not
// a step. It decodes again, off the common path, to tell a bad object
// from good one followed by more data, and to name an output item that is
// not one.
func notAStep(data []byte, err error) error {
	var w struct {
		stepWire
		Output []json.RawMessage `json:"output"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&w); err != nil {
		return malformed("not a JSON step object: %v", err)
	}
	// More would miss a stray ']' or '}': only the end of input will do.
	if _, err := dec.Token(); err != io.EOF {
		return malformed("data after the JSON object")
	}
	for i, raw := range w.Output {
		var item itemWire
		if err := json.Unmarshal(raw, &item); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field == "" {
				return malformed("output[%d]: a JSON %s, not an item object", i, te.Value)
			}
			return malformed("output[%d]: %v", i, err)
		}
	}
	// A value of the wrong type that a later duplicate key replaced.
	return malformed("not a JSON step object: %v", err)
}

// stepWire is the step message as it is decoded: in one pass, items
// included.
type stepWire struct {
	AgentID string     `json:"agent_id"`
	TurnID  string     `json:"turn_id"`
	Step    *int64     `json:"step"`
	Context *Context   `json:"context"`
	Output  []itemWire `json:"output"`
}

// itemWire is an output item as it is decoded.
type itemWire struct {
	Type      string          `json:"type"`
	CallID    string          `json:"call_id"`
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Execution string          `json:"execution"`
	Arguments json.RawMessage `json:"arguments"`
	Content   json.RawMessage `json:"content"`
}

// StepMsgID is the Nats-Msg-Id of a step message.
func StepMsgID(agentID, turnID string, step int64) string {
	return agentID + "." + turnID + "." + strconv.FormatInt(step, 10)
}
