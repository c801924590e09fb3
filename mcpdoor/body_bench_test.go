package mcpdoor

import "testing"

// callBody is a 2026-07-28 tools/call as the Go SDK's client sends it.
const callBody = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"v0"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"noop","arguments":{"text":"hello"}}}`

func BenchmarkCheckBody(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := checkBody([]byte(callBody)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseFast(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := parseFast([]byte(callBody)); !ok {
			b.Fatal("not fast")
		}
	}
}
