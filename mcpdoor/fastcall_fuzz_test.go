package mcpdoor

import (
	"encoding/json"
	"testing"
)

// FuzzParseFast: whatever a client sends, what the fast path takes is a
// 2026-07-28 tools/call with a string or integer id, a tool name, object
// arguments (or none) and no progressToken; and its answer to it is one
// JSON-RPC response with that id.
func FuzzParseFast(f *testing.F) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},` + meta + `}}`)
	f.Add(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo",` + meta + `}}`)
	f.Add(`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo",` + meta + `}}`)
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","requestState":"s",` + meta + `}}`)
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":"x",` + meta + `}} {}`)
	f.Add(`[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`)
	f.Fuzz(func(t *testing.T, body string) {
		req, params, ok := parseFast([]byte(body))
		if !ok {
			return
		}
		if req.Method != "tools/call" || params.Name == "" || params.Meta[metaProtocolVersion] != fastVersion {
			t.Fatalf("took %q: %+v %+v", body, req, params)
		}
		if _, has := params.Meta["progressToken"]; has {
			t.Fatalf("took a progressToken: %q", body)
		}
		if len(params.Arguments) > 0 {
			var args map[string]any
			if json.Unmarshal(params.Arguments, &args) != nil {
				t.Fatalf("took arguments that are no object: %q", params.Arguments)
			}
		}
		var out struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(fastResponse(req.ID, nil, nil), &out); err != nil || out.JSONRPC != "2.0" || string(out.ID) != string(req.ID) {
			t.Fatalf("answer %+v %v for id %s", out, err, req.ID)
		}
	})
}
