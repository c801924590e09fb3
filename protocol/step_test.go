package protocol_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

const subject = "turn.call.a1.t1"

// protocolExample is the step message of the wire contract.
const protocolExample = `{
  "agent_id": "a1",
  "turn_id": "t1",
  "step": 0,
  "context": {
    "kind": "text",
    "bindings": {"web": true, "brain": true, "background_jobs": true, "schedules": true, "computer": true},
    "skills": ["release-notes"],
    "mcp_servers": ["github"],
    "workflow_id": "",
    "task_id": ""
  },
  "output": [
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
    {"type": "function_call", "call_id": "call_1", "name": "web_fetch", "arguments": "{\"url\":\"https://example.com\"}"},
    {"type": "function_call", "call_id": "call_2", "namespace": "github", "name": "list_issues", "arguments": "{}"},
    {"type": "tool_search_call", "call_id": "call_3", "execution": "client", "arguments": {"query": "issues"}}
  ]
}`

// stepWith returns a valid step message with one top-level field replaced
// (or removed, when value is "").
func stepWith(field, value string) string {
	m := map[string]json.RawMessage{
		"agent_id": json.RawMessage(`"a1"`),
		"turn_id":  json.RawMessage(`"t1"`),
		"step":     json.RawMessage(`1`),
		"context":  json.RawMessage(`{"kind":"text"}`),
		"output":   json.RawMessage(`[]`),
	}
	if value == "" {
		delete(m, field)
	} else {
		m[field] = json.RawMessage(value)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func withOutput(items ...string) string {
	return stepWith("output", "["+strings.Join(items, ",")+"]")
}

func TestParseStepMalformed(t *testing.T) {
	valid := stepWith("step", "1")
	tests := []struct {
		name    string
		prefix  string // default turn.call
		subject string // default subject
		data    string
		max     int
		reason  string
	}{
		{name: "over the size limit", data: valid, max: 20, reason: "over the 20 byte limit"},
		{name: "wrong stream", prefix: protocol.PrefixTask, data: valid, reason: `subject "turn.call.a1.t1" is not turn.task.<agent_id>.<turn_id>`},
		{name: "subject too long", subject: "turn.call.a1.t1.x", data: valid, reason: "is not turn.call.<agent_id>.<turn_id>"},
		{name: "subject too short", subject: "turn.call.a1", data: valid, reason: "is not turn.call.<agent_id>.<turn_id>"},
		{name: "not JSON", data: `step 1 please`, reason: "not a JSON step object"},
		{name: "empty", data: ``, reason: "not a JSON step object"},
		{name: "an array", data: `[1]`, reason: "not a JSON step object"},
		{name: "truncated", data: valid[:len(valid)-3], reason: "not a JSON step object"},
		{name: "two objects", data: valid + ` {}`, reason: "data after the JSON object"},
		{name: "stray closing bracket", data: valid + `]`, reason: "data after the JSON object"},
		{name: "stray closing brace", data: valid + "\n}", reason: "data after the JSON object"},
		{name: "trailing garbage", data: valid + `x`, reason: "data after the JSON object"},
		{name: "null", data: `null`, reason: "step is missing"},
		{name: "step missing", data: stepWith("step", ""), reason: "step is missing"},
		{name: "step a string", data: stepWith("step", `"1"`), reason: "not a JSON step object"},
		{name: "step a fraction", data: stepWith("step", `1.5`), reason: "not a JSON step object"},
		{name: "step negative", data: stepWith("step", `-1`), reason: "step -1 is negative"},
		{name: "context missing", data: stepWith("context", ""), reason: "context is missing"},
		{name: "context null", data: stepWith("context", "null"), reason: "context is missing"},
		{name: "context kind", data: stepWith("context", `{"kind":"voice"}`), reason: `context.kind "voice" is neither`},
		{name: "context kind missing", data: stepWith("context", `{}`), reason: `context.kind "" is neither`},
		{name: "bindings of the wrong type", data: stepWith("context", `{"kind":"text","bindings":["web"]}`), reason: "not a JSON step object"},
		{name: "workflow id", data: stepWith("context", `{"kind":"workflow_task","workflow_id":"w 1"}`), reason: `workflow or task id "w 1"`},
		{name: "task id", data: stepWith("context", `{"kind":"workflow_task","workflow_id":"w1","task_id":"t/1"}`), reason: `workflow or task id "t/1"`},
		{name: "agent id missing", data: stepWith("agent_id", ""), reason: `agent_id "" is not 1-64 characters`},
		{name: "agent id with a dot", subject: "turn.call.a.1.t1", data: stepWith("agent_id", `"a.1"`), reason: `is not turn.call.<agent_id>.<turn_id>: agent_id "a.1" is not 1-64 characters`},
		{name: "turn id with a dot", subject: "turn.call.a1.t.1", data: stepWith("turn_id", `"t.1"`), reason: `turn_id "t.1" is not 1-64 characters`},
		{name: "an output item that is a string", data: stepWith("output", `["hello"]`), reason: "output[0]: a JSON string, not an item object"},
		{name: "agent id too long", subject: "turn.call." + strings.Repeat("a", 65) + ".t1", data: stepWith("agent_id", `"`+strings.Repeat("a", 65)+`"`), reason: "agent_id"},
		{name: "turn id with a space", subject: "turn.call.a1.t 1", data: stepWith("turn_id", `"t 1"`), reason: `turn_id "t 1" is not 1-64 characters`},
		{name: "ids disagree with the subject", subject: "turn.call.a2.t1", data: valid, reason: `ids a1.t1 disagree with subject "turn.call.a2.t1"`},
		{name: "output missing", data: stepWith("output", ""), reason: "output is missing"},
		{name: "output null", data: stepWith("output", "null"), reason: "output is missing"},
		{name: "output an object", data: stepWith("output", "{}"), reason: "not a JSON step object"},
		{name: "item not an object", data: withOutput(`{"type":"message"}`, `5`), reason: "output[1]: "},
		{name: "item type not a string", data: withOutput(`{"type":1}`), reason: "output[0]: "},
		{name: "call id missing", data: withOutput(`{"type":"function_call","name":"f","arguments":"{}"}`), reason: "output[0]: call_id is not 1-256 printable characters"},
		{name: "call id too long", data: withOutput(`{"type":"function_call","call_id":"` + strings.Repeat("c", 257) + `","name":"f"}`), reason: "output[0]: call_id"},
		{name: "call id with a newline", data: withOutput(`{"type":"tool_search_call","call_id":"c\n1"}`), reason: "output[0]: call_id"},
		{name: "call id twice", data: withOutput(`{"type":"function_call","call_id":"c1","name":"f"}`, `{"type":"tool_search_call","call_id":"c1"}`), reason: `output[1]: call_id "c1" appears twice`},
		{name: "function call without a name", data: withOutput(`{"type":"function_call","call_id":"c1","arguments":"{}"}`), reason: "output[0]: function_call without a name"},
		{name: "arguments an object", data: withOutput(`{"type":"function_call","call_id":"c1","name":"f","arguments":{"a":1}}`), reason: "output[0]: arguments is not a string"},
		{name: "a bad output replaced by a second one", data: `{"agent_id":"a1","turn_id":"t1","step":0,"context":{"kind":"text"},"output":[5],"output":[]}`, reason: "not a JSON step object: json: cannot unmarshal number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix, subj := tt.prefix, tt.subject
			if prefix == "" {
				prefix = protocol.PrefixCall
			}
			if subj == "" {
				subj = subject
			}
			st, err := protocol.ParseStep(prefix, subj, []byte(tt.data), tt.max)
			if err == nil {
				t.Fatalf("ParseStep accepted it: %+v", st)
			}
			if !errors.Is(err, protocol.ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not give the reason %q", err, tt.reason)
			}
			if st != nil {
				t.Error("a step came back with the error")
			}
		})
	}
}

func TestParseStepProtocolExample(t *testing.T) {
	st, err := protocol.ParseStep(protocol.PrefixCall, subject, []byte(protocolExample), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if st.AgentID != "a1" || st.TurnID != "t1" || st.Step != 0 || st.Items != 4 || !st.Prose {
		t.Errorf("step %+v", st)
	}
	c := st.Context
	if c.Kind != protocol.KindText || !c.Bound("web") || !c.Bound("computer") || c.Bound("diagnostics") ||
		len(c.Skills) != 1 || c.MCPServers[0] != "github" {
		t.Errorf("context %+v", c)
	}
	want := []protocol.CallItem{
		{Type: protocol.ItemFunctionCall, CallID: "call_1", Name: "web_fetch", Arguments: `{"url":"https://example.com"}`},
		{Type: protocol.ItemFunctionCall, CallID: "call_2", Namespace: "github", Name: "list_issues", Arguments: `{}`},
		{Type: protocol.ItemToolSearchCall, CallID: "call_3", Execution: "client", Search: json.RawMessage(`{"query": "issues"}`)},
	}
	if len(st.Calls) != len(want) {
		t.Fatalf("calls %+v", st.Calls)
	}
	for i, w := range want {
		g := st.Calls[i]
		if g.Type != w.Type || g.CallID != w.CallID || g.Namespace != w.Namespace || g.Name != w.Name ||
			g.Arguments != w.Arguments || string(g.Search) != string(w.Search) || g.Execution != w.Execution {
			t.Errorf("call %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestParseStepWellFormed(t *testing.T) {
	tests := []struct {
		name  string
		data  string
		calls []string // call ids
		prose bool
	}{
		{"no output items", withOutput(), nil, false},
		{"prose only", withOutput(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}`), nil, true},
		{"empty message", withOutput(`{"type":"message","content":[]}`), nil, false},
		{"null content", withOutput(`{"type":"message","content":null}`), nil, false},
		{"message without content", withOutput(`{"type":"message"}`), nil, false},
		{"other items ignored", withOutput(`{"type":"reasoning","summary":[]}`, `{"type":"function_call_output","call_id":"old","output":"x"}`, `{"type":"web_search_call","id":"ws"}`), nil, false},
		{"calls in order", withOutput(`{"type":"function_call","call_id":"b","name":"f","arguments":"{}"}`, `{"type":"message","content":[{"type":"output_text","text":"x"}]}`, `{"type":"function_call","call_id":"a","name":"g"}`), []string{"b", "a"}, true},
		{"null arguments", withOutput(`{"type":"function_call","call_id":"c1","name":"f","arguments":null}`), []string{"c1"}, false},
		{"call id of any printable text", withOutput(`{"type":"function_call","call_id":"fc_01J/é ✓.x","name":"f"}`), []string{"fc_01J/é ✓.x"}, false},
		{"unknown fields ignored", stepWith("extra", `{"anything":[1,2]}`), nil, false},
		{"task turn", stepWith("context", `{"kind":"workflow_task","workflow_id":"wf_1","task_id":"task-2"}`), nil, false},
		{"surrounding whitespace", "\n  " + withOutput() + "\n\n", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := protocol.ParseStep(protocol.PrefixCall, subject, []byte(tt.data), 0)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, c := range st.Calls {
				ids = append(ids, c.CallID)
			}
			if strings.Join(ids, ",") != strings.Join(tt.calls, ",") || st.Prose != tt.prose {
				t.Errorf("calls %v prose %v, want %v %v", ids, st.Prose, tt.calls, tt.prose)
			}
		})
	}
	// The task stream.
	if _, err := protocol.ParseStep(protocol.PrefixTask, "turn.task.a1.t1", []byte(withOutput()), 0); err != nil {
		t.Errorf("task subject: %v", err)
	}
}

func TestIDs(t *testing.T) {
	for id, ok := range map[string]bool{"a": true, "A-z_09": true, strings.Repeat("x", 64): true, "": false, strings.Repeat("x", 65): false, "a.b": false, "a b": false, "é": false, "a*": false} {
		if protocol.ValidID(id) != ok {
			t.Errorf("ValidID(%q) = %v", id, !ok)
		}
	}
	for id, ok := range map[string]bool{"call_1": true, "fc 1/2.é": true, strings.Repeat("c", 256): true, "": false, strings.Repeat("c", 257): false, "a\tb": false, "a\x00": false, "\xff": false} {
		if protocol.ValidCallID(id) != ok {
			t.Errorf("ValidCallID(%q) = %v", id, !ok)
		}
	}
	if got := protocol.CallOutputMsgID("a1", "t1", 3, "c.1"); got != "a1.t1.3.c.1" {
		t.Errorf("CallOutputMsgID = %q", got)
	}
	// A call named "done" must not share step.done's id: step.done would
	// be dropped as its duplicate.
	for callID, want := range map[string]string{"done": "a1.t1.3.~done", "~done": "a1.t1.3.~~done", "~": "a1.t1.3.~~", "done2": "a1.t1.3.done2", "pending": "a1.t1.3.~pending", "~pending": "a1.t1.3.~~pending"} {
		if got := protocol.CallOutputMsgID("a1", "t1", 3, callID); got != want || got == protocol.StepDoneMsgID("a1", "t1", 3) {
			t.Errorf("CallOutputMsgID(%q) = %q, want %q", callID, got, want)
		}
	}
	// The client trims a header value's spaces: an id that ends with one
	// is encoded, so that "c1 " and "c1" keep two ids.
	if got := protocol.CallOutputMsgID("a1", "t1", 3, "c1 "); got != "a1.t1.3.~"+protocol.KeyToken("c1 ") || got == protocol.CallOutputMsgID("a1", "t1", 3, "c1") {
		t.Errorf("CallOutputMsgID(%q) = %q", "c1 ", got)
	}
	if got := protocol.StepDoneMsgID("a1", "t1", 3); got != "a1.t1.3.done" {
		t.Errorf("StepDoneMsgID = %q", got)
	}
	if got := protocol.CallKey("a1", "t1", 3, "c.1/x"); got != "call.a1.t1.3."+protocol.KeyToken("c.1/x") || strings.ContainsAny(protocol.KeyToken("c.1/x +"), "./+ =") {
		t.Errorf("CallKey = %q", got)
	}
	if got := protocol.Subject(protocol.PrefixOutput, "a1", "t1"); got != "turn.call.output.a1.t1" {
		t.Errorf("Subject = %q", got)
	}
}
