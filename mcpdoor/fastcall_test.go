package mcpdoor_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/mcpdoor"
)

// post2026 sends one 2026-07-28 tools/call of name with args and extra
// _meta entries, and returns the HTTP answer's content type and its
// JSON-RPC response (from a JSON body or the SSE stream's last message).
func post2026(t *testing.T, url, name, args string, meta map[string]any, hdr map[string]string) (string, map[string]any) {
	t.Helper()
	m := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "fast-test", "version": "1"},
	}
	for k, v := range meta {
		m[k] = v
	}
	mb, _ := json.Marshal(m)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":%s}}`, name, args, mb)
	req := mcpPost(url+mcpdoor.Path, "", "2026-07-28", body)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", name)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	var raw []byte
	if strings.HasPrefix(ct, "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id":7`) {
				raw = []byte(d)
			}
		}
	} else {
		raw, _ = io.ReadAll(resp.Body)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%d %s: %q is not a JSON-RPC response: %v", resp.StatusCode, ct, raw, err)
	}
	return ct, out
}

// TestFastCallsAnswerAsTheSDK sends the same tools/call served by the
// door's fast path (a plain 2026-07-28 request: one JSON answer) and by
// the SDK (the same request with a progressToken, which the fast path
// leaves to the SDK: an SSE stream), and wants the same JSON-RPC
// response: a result, a tool error, an invalid _meta, and an unknown
// tool, which the fast path hands to the SDK.
func TestFastCallsAnswerAsTheSDK(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	door := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"})
	cases := []struct {
		name, tool, args string
		meta             map[string]any
		fast             bool
	}{
		{"result", "echo", `{"text":"fast"}`, nil, true},
		{"tool error", "fail", `{"text":"no"}`, nil, true},
		// Errors: the SDK answers them with one JSON object too.
		{"invalid _meta", "echo", `{"text":"x"}`, map[string]any{mcpdoor.MetaTurn: "not a turn id"}, false},
		{"unknown tool", "nope", `{}`, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct, fast := post2026(t, door.URL, c.tool, c.args, c.meta, nil)
			if c.fast && ct != "application/json" {
				t.Errorf("answered as %q, want the fast path's one JSON object", ct)
			}
			withProgress := map[string]any{"progressToken": "p1"}
			for k, v := range c.meta {
				withProgress[k] = v
			}
			ct2, sdk := post2026(t, door.URL, c.tool, c.args, withProgress, nil)
			if !strings.HasPrefix(ct2, "text/event-stream") && c.fast {
				t.Errorf("with a progressToken answered as %q, want the SDK's stream", ct2)
			}
			if !reflect.DeepEqual(fast, sdk) {
				t.Errorf("fast path: %v\nSDK:       %v", fast, sdk)
			}
		})
	}
	// A header the fast path does not know sends the request to the SDK.
	if ct, _ := post2026(t, door.URL, "echo", `{"text":"x"}`, nil, map[string]string{"Mcp-Param-Text": "x"}); ct == "application/json" {
		t.Error("a request with an Mcp-Param-* header was served by the fast path")
	}
}

// TestFastPathReadsKeysAsTheSDK: the SDK reads a body's keys as written,
// encoding/json without regard to case. A tools/call whose params name
// the tool under "Name" names no tool for the SDK, whatever Mcp-Name
// says: the fast path must not run it either.
func TestFastPathReadsKeysAsTheSDK(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	door := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"})
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for name, body := range map[string]string{
		"Name":       `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"Name":"echo","arguments":{"text":"ran"},` + meta + `}}`,
		"name, Name": `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"where","Name":"echo","arguments":{"text":"ran"},` + meta + `}}`,
		"nam\u017f":  `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"nam\u017f":"echo","arguments":{"text":"ran"},` + meta + `}}`,
	} {
		req := mcpPost(door.URL+mcpdoor.Path, "", "2026-07-28", body)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "echo")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), `"ran"`) || !strings.Contains(string(b), `"error"`) {
			t.Errorf("%s: %d %s, want the SDK's refusal", name, resp.StatusCode, b)
		}
	}
}
