package catalog

import (
	"errors"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

// FuzzParseCatalogRequest: any body gets a request with valid ids, or an
// ErrBadRequest; never a panic.
func FuzzParseCatalogRequest(f *testing.F) {
	for _, s := range []string{
		`{"agent_id":"a1","turn_id":"t1","context":{"kind":"text","bindings":{"web":true}}}`,
		`{"agent_id":"a1","turn_id":"t1","context":{"kind":"workflow_task","workflow_id":"w","task_id":"x"}}`,
		`{"agent_id":"a 1","turn_id":"t1","context":{"kind":"text"}}`,
		`{"agent_id":"a1","turn_id":"t1","context":{"kind":"text","bindings":{"web":"yes"}}}`,
		`not json`, `{}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := ParseRequest(data)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		if !protocol.ValidID(req.AgentID) || !protocol.ValidID(req.TurnID) {
			t.Fatalf("accepted invalid ids %q %q", req.AgentID, req.TurnID)
		}
		if req.Context.Kind != protocol.KindText && req.Context.Kind != protocol.KindWorkflowTask {
			t.Fatalf("accepted kind %q", req.Context.Kind)
		}
	})
}
