package protocol_test

import (
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

func BenchmarkParseStep(b *testing.B) {
	data := []byte(`{"agent_id":"load","turn_id":"r123456-42","step":0,"context":{"kind":"text","bindings":{"diagnostics":true}},"output":[{"type":"function_call","call_id":"c0","name":"ping","arguments":"{}"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.ParseStep(protocol.PrefixCall, "turn.call.load.r123456-42", data, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallDigest is what the journal's digest adds to every call
// that is claimed.
func BenchmarkCallDigest(b *testing.B) {
	c := protocol.CallItem{Type: protocol.ItemFunctionCall, CallID: "call_1", Name: "read_file", Arguments: `{"path":"src/main.go","offset":0,"limit":200}`}
	b.ReportAllocs()
	for b.Loop() {
		_ = protocol.CallDigest(c)
	}
}
