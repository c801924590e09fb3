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
