package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

// The digest is the same for the two spellings of one value the worker
// and a reader may hold (step.pending's compact, HTML-escaped JSON and an
// indented one), and differs for another call id, name or value.
func TestDecisionDigest(t *testing.T) {
	a := protocol.DecisionDigest("c1", "", "run_command", []byte(`{"command":"echo <a> & b"}`))
	if b := protocol.DecisionDigest("c1", "", "run_command", []byte("{\n  \"command\": \"echo \\u003ca\\u003e \\u0026 b\"\n}")); a != b {
		t.Errorf("two spellings of one value: %s and %s", a, b)
	}
	for _, other := range []string{
		protocol.DecisionDigest("c2", "", "run_command", []byte(`{"command":"echo <a> & b"}`)),
		protocol.DecisionDigest("c1", "x", "run_command", []byte(`{"command":"echo <a> & b"}`)),
		protocol.DecisionDigest("c1", "", "run_command", []byte("{\"command\":\"echo <a> & b\u202e\"}")),
		protocol.DecisionDigest("c1", "", "run_command", []byte(`{"command":"echo <a> &  b"}`)),
	} {
		if other == a {
			t.Errorf("another call has the same digest %s", a)
		}
	}
	if !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+43 {
		t.Errorf("digest %q", a)
	}
}

// ParseApproval keeps a decision's digest and refuses one that is not
// in DecisionDigest's form.
func TestParseApprovalDigest(t *testing.T) {
	d := protocol.DecisionDigest("c1", "", "mark", []byte(`{}`))
	a, err := protocol.ParseApproval("turn.approval.a1.t1", []byte(`{"agent_id":"a1","turn_id":"t1","step":0,"decisions":[{"call_id":"c1","approved":true,"digest":"`+d+`"}]}`), 0)
	if err != nil || a.Decisions[0].Digest != d {
		t.Fatalf("%+v, %v", a, err)
	}
	for _, bad := range []string{`"md5:x"`, `"sha256:short"`, `7`, `"sha256:` + strings.Repeat("!", 43) + `"`} {
		_, err := protocol.ParseApproval("turn.approval.a1.t1", []byte(`{"agent_id":"a1","turn_id":"t1","step":0,"decisions":[{"call_id":"c1","approved":true,"digest":`+bad+`}]}`), 0)
		if !errors.Is(err, protocol.ErrBadApproval) {
			t.Errorf("digest %s: %v", bad, err)
		}
	}
}
