package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

// FuzzParseStep: ParseStep never panics on any subject and body; what it
// refuses wraps ErrMalformed, and what it accepts keeps the contract's
// invariants.
func FuzzParseStep(f *testing.F) {
	seeds := []string{
		protocolExample,
		stepWith("step", "1"),
		stepWith("step", "-1"),
		stepWith("context", `{"kind":"workflow_task","workflow_id":"w1","task_id":"t1"}`),
		stepWith("context", `{"kind":"text","approval":"destructive"}`),
		stepWith("context", `{"kind":"text","approval":["run_command","github.*","github.delete_issue"]}`),
		stepWith("context", `{"kind":"text","approval":"none"}`),
		stepWith("context", `{"kind":"text","approval":true}`),
		stepWith("context", `{"kind":"text","approval":["a.b.c",1]}`),
		withOutput(`{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"}`, `{"type":"function_call","call_id":"c1","name":"g"}`),
		withOutput(`{"type":"function_call","call_id":"c1","name":"f","arguments":{"a":1}}`),
		withOutput(`{"type":"tool_search_call","call_id":"s1","arguments":"not an object"}`),
		withOutput(`{"type":"message","content":[{"type":"output_text","text":"hi"}]}`, `5`),
		stepWith("step", "1") + "]",
		`{"agent_id":"a1","turn_id":"t1","step":0,"context":{"kind":"text"},"output":[],"output":null}`,
		`{"AGENT_ID":"a1","Turn_Id":"t1","step":0,"context":{"kind":"text"},"output":[]}`,
		`null`,
		`[]`,
		``,
	}
	for _, s := range seeds {
		f.Add("turn.call.a1.t1", []byte(s))
	}
	f.Add("turn.task.a1.t1", []byte(stepWith("step", "2")))
	f.Add("turn.call.a1", []byte(stepWith("step", "2")))
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		for _, prefix := range []string{protocol.PrefixCall, protocol.PrefixTask} {
			st, err := protocol.ParseStep(prefix, subject, data, 1<<16)
			if err != nil {
				if st != nil {
					t.Fatalf("a step came back with the error %v", err)
				}
				if !errors.Is(err, protocol.ErrMalformed) || len(err.Error()) <= len(protocol.ErrMalformed.Error())+2 {
					t.Fatalf("error %q does not wrap ErrMalformed with a reason", err)
				}
				continue
			}
			if subject != prefix+"."+st.AgentID+"."+st.TurnID {
				t.Fatalf("accepted subject %q for ids %s.%s", subject, st.AgentID, st.TurnID)
			}
			if !protocol.ValidID(st.AgentID) || !protocol.ValidID(st.TurnID) || st.Step < 0 {
				t.Fatalf("accepted step %+v", st)
			}
			if k := st.Context.Kind; k != protocol.KindText && k != protocol.KindWorkflowTask {
				t.Fatalf("accepted context kind %q", k)
			}
			if ap := st.Context.Approval; ap.Level != "" && ap.Level != protocol.ApprovalDestructive && ap.Level != protocol.ApprovalAll {
				t.Fatalf("accepted approval level %q", ap.Level)
			}
			for _, n := range st.Context.Approval.Names {
				if !protocol.ValidApprovalName(n) {
					t.Fatalf("accepted approval name %q", n)
				}
			}
			if len(st.Calls) > st.Items {
				t.Fatalf("%d calls from %d items", len(st.Calls), st.Items)
			}
			seen := map[string]bool{}
			for _, c := range st.Calls {
				if !protocol.ValidCallID(c.CallID) || seen[c.CallID] {
					t.Fatalf("accepted call id %q", c.CallID)
				}
				seen[c.CallID] = true
				switch c.Type {
				case protocol.ItemFunctionCall:
					if c.Name == "" {
						t.Fatalf("accepted a function_call without a name")
					}
				case protocol.ItemToolSearchCall:
				default:
					t.Fatalf("accepted a call of type %q", c.Type)
				}
			}
			// A subject is never split differently from its ids.
			if strings.Count(subject, ".") != 3 {
				t.Fatalf("accepted subject %q", subject)
			}
		}
	})
}
