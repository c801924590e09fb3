package mcpdoor

import (
	"encoding/json"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

// FuzzParseCallMeta: whatever a client puts in _meta, the door's keys
// are valid ids or an error.
func FuzzParseCallMeta(f *testing.F) {
	f.Add(`{"io.agentbull.toolruntime/turn":"t1","io.agentbull.toolruntime/call":"c1"}`)
	f.Add(`{"io.agentbull.toolruntime/turn":"a.b"}`)
	f.Add(`{"io.agentbull.toolruntime/turn":7,"progressToken":1}`)
	f.Fuzz(func(t *testing.T, s string) {
		var meta map[string]any
		if json.Unmarshal([]byte(s), &meta) != nil {
			return
		}
		m, err := parseCallMeta(meta)
		if err != nil {
			return
		}
		if m.Turn != "" && !protocol.ValidID(m.Turn) {
			t.Fatalf("turn %q", m.Turn)
		}
		if m.CallID != "" && !protocol.ValidCallID(m.CallID) {
			t.Fatalf("call %q", m.CallID)
		}
	})
}

// FuzzParseCatalog: a catalog reply never panics the door, and every
// tool it lists has an MCP name and an object schema.
func FuzzParseCatalog(f *testing.F) {
	f.Add(`[{"type":"function","name":"a","description":"d","parameters":{"type":"object"}},{"type":"namespace","name":"ns","tools":[{"type":"function","name":"b","parameters":{"type":"object"}},{"type":"function","name":"c","defer_loading":true}]},{"type":"tool_search"}]`)
	f.Add(`[{"type":"function","name":"a","parameters":[]}]`)
	f.Fuzz(func(t *testing.T, s string) {
		tools, _, err := parseCatalog(json.RawMessage(s), nil)
		if err != nil {
			return
		}
		for _, tl := range tools {
			if !mcpName.MatchString(tl.name) || !objectSchema(tl.tool.InputSchema.(json.RawMessage)) {
				t.Fatalf("listed %+v", tl)
			}
		}
	})
}

// FuzzParseJWKS: a JWKS document never panics the door.
func FuzzParseJWKS(f *testing.F) {
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","kid":"k","x":"AA","y":"AA"},{"kty":"RSA","kid":"r","n":"AQAB","e":"AQAB"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseJWKS(b)
	})
}
