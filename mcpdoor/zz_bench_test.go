package mcpdoor

import "testing"

func BenchmarkCheckBody(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello world, a typical argument"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := checkBody(body); err != nil {
			b.Fatal(err)
		}
	}
}
