package protocol_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

func TestContextApproval(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  protocol.ApprovalScope
		err   string // a part of the error; "" accepts
	}{
		{`"destructive"`, protocol.ApprovalScope{Level: "destructive"}, ""},
		{`"all"`, protocol.ApprovalScope{Level: "all"}, ""},
		{`null`, protocol.ApprovalScope{}, ""},
		{`["run_command","github.*","github.delete_issue"]`, protocol.ApprovalScope{Names: []string{"run_command", "github.*", "github.delete_issue"}}, ""},
		{`"none"`, protocol.ApprovalScope{}, `not "none"`},
		{`"ALL"`, protocol.ApprovalScope{}, `context.approval must be`},
		{`true`, protocol.ApprovalScope{}, `context.approval must be`},
		{`{"level":"all"}`, protocol.ApprovalScope{}, `context.approval must be`},
		{`3`, protocol.ApprovalScope{}, `context.approval must be`},
		{`["ok", 1]`, protocol.ApprovalScope{}, `every entry must be a string`},
		{`["a.b.c"]`, protocol.ApprovalScope{}, `"a.b.c" is not one`},
		{`["*"]`, protocol.ApprovalScope{}, `"*" is not one`},
		{`[""]`, protocol.ApprovalScope{}, `is not one`},
		{`["` + strings.Repeat("x", 65) + `"]`, protocol.ApprovalScope{}, `is not one`},
		{`[` + strings.Repeat(`"a",`, protocol.MaxApprovalNames) + `"a"]`, protocol.ApprovalScope{}, `more than 256`},
	} {
		st, err := protocol.ParseStep(protocol.PrefixCall, "turn.call.a1.t1", []byte(stepWith("context", `{"kind":"text","approval":`+tt.value+`}`)), 0)
		if tt.err != "" {
			if err == nil || !errors.Is(err, protocol.ErrMalformed) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want one saying %q", tt.value, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.value, err)
			continue
		}
		got := st.Context.Approval
		if got.Level != tt.want.Level || strings.Join(got.Names, ",") != strings.Join(tt.want.Names, ",") {
			t.Errorf("%s: got %+v, want %+v", tt.value, got, tt.want)
		}
		// It round-trips, and an empty one stays out of the JSON.
		data, _ := json.Marshal(st.Context)
		var back protocol.Context
		if err := json.Unmarshal(data, &back); err != nil || back.Approval.Level != got.Level || len(back.Approval.Names) != len(got.Names) {
			t.Errorf("%s: round trip %s: %v %+v", tt.value, data, err, back.Approval)
		}
		if got.IsZero() && strings.Contains(string(data), "approval") {
			t.Errorf("%s: an empty approval is written: %s", tt.value, data)
		}
	}
}

const approvalExample = `{"agent_id": "a1", "turn_id": "t1", "step": 3,
 "decisions": [{"call_id": "call_7", "approved": false, "reason": "not on main"}]}`

func TestParseApproval(t *testing.T) {
	a, err := protocol.ParseApproval("turn.approval.a1.t1", []byte(approvalExample), 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Step != 3 || len(a.Decisions) != 1 || !reflect.DeepEqual(a.Decisions[0], protocol.Decision{CallID: "call_7", Approved: false, Reason: "not on main"}) {
		t.Fatalf("parsed %+v", a)
	}
	for _, tt := range []struct{ subject, body, err string }{
		{"turn.approval.a1.t1", `not json`, "not a JSON approval object"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":3,"decisions":[]}x`, "data after"},
		{"turn.approval.a1.t1", `[]`, "not a JSON approval object"},
		{"turn.approval.a1.t1", `{"turn_id":"t1","step":3,"decisions":[{"call_id":"c","approved":true}]}`, "agent_id and turn_id are required"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","decisions":[{"call_id":"c","approved":true}]}`, "step is missing"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":"3","decisions":[{"call_id":"c","approved":true}]}`, "cannot unmarshal"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":-1,"decisions":[{"call_id":"c","approved":true}]}`, "negative"},
		{"turn.approval.a1.t2", approvalExample, "disagree with subject"},
		{"turn.approval.a1", approvalExample, "is not turn.approval.<agent_id>.<turn_id>"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":3}`, "decisions is missing"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":3,"decisions":[]}`, "decisions is empty"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":3,"decisions":[{"approved":true}]}`, "call_id is missing"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":3,"decisions":[{"call_id":"c"}]}`, "approved (true or false) is missing"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":3,"decisions":[{"call_id":"c","approved":"yes"}]}`, "cannot unmarshal"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":3,"decisions":[{"call_id":"c","approved":true,"reason":5}]}`, "cannot unmarshal"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":3,"decisions":{"call_id":"c"}}`, "cannot unmarshal"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":3,"decisions":[{"call_id":"c","approved":true},{"call_id":"c","approved":false}]}`, "decided twice"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":3,"decisions":[{"call_id":"","approved":true}]}`, "call_id is not"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":3,"decisions":[{"call_id":"c","approved":false,"input":{"repo":"x"}}]}`, "input comes with approved true"},
		{"turn.approval.a1.t1", `{"agent_id":"a1","turn_id":"t1","step":3,"decisions":[{"call_id":"c","approved":true,"input":{"repo":}}]}`, "not a JSON approval object"},
	} {
		a, err := protocol.ParseApproval(tt.subject, []byte(tt.body), 0)
		if err == nil || a != nil || !errors.Is(err, protocol.ErrBadApproval) || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s %s: got %+v, %v; want an error saying %q", tt.subject, tt.body, a, err, tt.err)
		}
	}
	if _, err := protocol.ParseApproval("turn.approval.a1.t1", []byte(approvalExample), 10); err == nil || !strings.Contains(err.Error(), "over the 10 byte limit") {
		t.Errorf("oversized answer: %v", err)
	}
}

// An input (1.3) comes back as it was sent, only with approved true; a
// null one is no input.
func TestParseApprovalInput(t *testing.T) {
	a, err := protocol.ParseApproval("turn.approval.a1.t1", []byte(`{"agent_id":"a1","turn_id":"t1","step":3,"decisions":[
		{"call_id":"c1","approved":true,"input":  {"repo": "toolruntime", "n": 2} },
		{"call_id":"c2","approved":true,"input":null},
		{"call_id":"c3","approved":false,"reason":"no","input":null}]}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(a.Decisions[0].Input); got != `{"repo": "toolruntime", "n": 2}` {
		t.Errorf("input %q", got)
	}
	if a.Decisions[1].Input != nil || a.Decisions[2].Input != nil {
		t.Errorf("a null input was kept: %+v", a.Decisions)
	}
	// It goes back on the wire as it came, and stays out when empty.
	data, _ := json.Marshal(a.Decisions)
	if want := `[{"call_id":"c1","approved":true,"input":{"repo":"toolruntime","n":2}},{"call_id":"c2","approved":true},{"call_id":"c3","approved":false,"reason":"no"}]`; string(data) != want {
		t.Errorf("marshalled %s, want %s", data, want)
	}
}

// A pending entry held for input carries its request; an approval's
// entry has none on the wire.
func TestPendingInputShape(t *testing.T) {
	p := protocol.StepPending{Type: protocol.EventStepPending, AgentID: "a1", TurnID: "t1", Step: 3, Approvals: []protocol.PendingCall{
		{CallID: "c1", Name: "create_issue", Namespace: "github", Arguments: json.RawMessage(`{}`), Reason: protocol.PendingInput,
			InputRequest: &protocol.InputRequest{Message: "Which repository?", RequestedSchema: json.RawMessage(`{"type":"object"}`)}},
		{CallID: "c2", Name: "run_command", Arguments: json.RawMessage(`{}`), Reason: "destructive"},
	}}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Approvals []map[string]json.RawMessage `json:"approvals"`
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if got := string(back.Approvals[0]["input_request"]); got != `{"message":"Which repository?","requested_schema":{"type":"object"}}` {
		t.Errorf("input_request %s", got)
	}
	if _, ok := back.Approvals[1]["input_request"]; ok {
		t.Errorf("an approval's entry has an input_request: %s", data)
	}
	if got := protocol.StepPendingRoundMsgID("a1", "t1", 3, 1); got != protocol.StepPendingMsgID("a1", "t1", 3) {
		t.Errorf("round 1 id %q", got)
	}
	if got := protocol.StepPendingRoundMsgID("a1", "t1", 3, 2); got != "a1.t1.3.pending.2" {
		t.Errorf("round 2 id %q", got)
	}
}

// FuzzParseApproval: ParseApproval never panics; what it refuses wraps
// ErrBadApproval with a reason, and what it accepts agrees with its
// subject and decides each call once.
func FuzzParseApproval(f *testing.F) {
	for _, s := range []string{
		approvalExample,
		`{"agent_id":"a1","turn_id":"t1","step":0,"decisions":[{"call_id":"c1","approved":true},{"call_id":"c2","approved":false}]}`,
		`{"agent_id":"a1","turn_id":"t1","step":0,"decisions":[{"call_id":"c1","approved":"true"}]}`,
		`{"agent_id":"a1","turn_id":"t1","step":0,"decisions":[{"call_id":"c1","approved":true},{"call_id":"c1","approved":true}]}`,
		`{"agent_id":"a1","turn_id":"t1","step":0,"decisions":null}`,
		`{"agent_id":"a1","turn_id":"t1","step":0,"decisions":[]}]`,
		`{"agent_id":"a1","turn_id":"t1","step":0,"decisions":[{"call_id":"c1","approved":true,"input":{"repo":"x","n":[1,2]}}]}`,
		`{"agent_id":"a1","turn_id":"t1","step":0,"decisions":[{"call_id":"c1","approved":false,"input":"x"}]}`,
		`{"agent_id":"a1","turn_id":"t1","step":0,"decisions":[{"call_id":"c1","approved":true,"input":null}]}`,
		`{"agent_id":"a1","turn_id":"t1","step":0,"decisions":[{"call_id":"c1","approved":true,"input":{]}]}`,
		`null`, `[]`, ``, `{}`,
	} {
		f.Add("turn.approval.a1.t1", []byte(s))
	}
	f.Add("turn.approval.a1.t1.x", []byte(approvalExample))
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		a, err := protocol.ParseApproval(subject, data, 1<<16)
		if err != nil {
			if a != nil {
				t.Fatalf("an approval came back with the error %v", err)
			}
			if !errors.Is(err, protocol.ErrBadApproval) || len(err.Error()) <= len(protocol.ErrBadApproval.Error())+2 {
				t.Fatalf("error %q does not wrap ErrBadApproval with a reason", err)
			}
			return
		}
		if subject != protocol.Subject(protocol.PrefixApproval, a.AgentID, a.TurnID) || a.Step < 0 || len(a.Decisions) == 0 {
			t.Fatalf("accepted %+v on %q", a, subject)
		}
		seen := map[string]bool{}
		for _, d := range a.Decisions {
			if !protocol.ValidCallID(d.CallID) || seen[d.CallID] || len(d.Reason) > textclip.MaxReasonBytes {
				t.Fatalf("accepted decision %+v", d)
			}
			if d.Input != nil && (!d.Approved || !json.Valid(d.Input) || string(d.Input) == "null") {
				t.Fatalf("accepted input %q with approved %v", d.Input, d.Approved)
			}
			seen[d.CallID] = true
		}
	})
}
