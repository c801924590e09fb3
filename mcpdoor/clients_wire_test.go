package mcpdoor_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/mcpdoor"
)

// wireAnswer is a JSON-RPC answer read from a JSON body or the first SSE
// event of one.
type wireAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func readAnswer(t *testing.T, body string) wireAnswer {
	t.Helper()
	if i := strings.Index(body, "data: "); i >= 0 {
		body = body[i+len("data: "):]
		if j := strings.IndexByte(body, '\n'); j >= 0 {
			body = body[:j]
		}
	}
	var a wireAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("not a JSON-RPC answer: %q", body)
	}
	return a
}

// What real clients send besides tools: the protocol versions they still
// put in initialize, a client that accepts JSON only, a batch (2025-03-26),
// the standalone GET stream, DELETE of a session, and the methods of the
// other capabilities. Each gets what the spec says, never a plain-text
// 400 or a 500.
func TestClientProtocolCompat(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	door := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"})
	u := door.URL + mcpdoor.Path

	for _, v := range []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"} {
		resp, body := post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v+`","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
			map[string]string{"MCP-Protocol-Version": ""})
		var init struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if a := readAnswer(t, body); resp.StatusCode != http.StatusOK || json.Unmarshal(a.Result, &init) != nil || init.ProtocolVersion != v {
			t.Errorf("initialize %s: %d %s", v, resp.StatusCode, body)
		}
	}
	// A version the door does not know is answered with its own.
	_, body := post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, nil)
	if !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
		t.Errorf("initialize 2099-01-01: %s", body)
	}

	for _, c := range []struct {
		name, accept, version, body string
		status                      int
		result                      string // in the answer's result
		code                        int    // or its error code
	}{
		{"Accept JSON only", "application/json", "2025-11-25", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"json only"}}}`, 200, `json only`, 0},
		{"Accept */*", "*/*", "2025-03-26", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, 200, `"echo"`, 0},
		{"Accept text/event-stream only", "text/event-stream", "2025-11-25", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, 200, `{}`, 0},
		{"batch 2025-03-26", "application/json, text/event-stream", "2025-03-26", `[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`, 200, `{}`, 0},
		{"notifications/initialized", "application/json, text/event-stream", "2025-11-25", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, "", 0},
		{"ping", "application/json, text/event-stream", "2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"ping"}`, 200, `{}`, 0},
		{"resources/list", "application/json, text/event-stream", "2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"resources/list"}`, 200, `"resources":[]`, 0},
		{"resources/templates/list", "application/json, text/event-stream", "2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"resources/templates/list"}`, 200, `"resourceTemplates":[]`, 0},
		{"prompts/list", "application/json, text/event-stream", "2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"prompts/list"}`, 200, `"prompts":[]`, 0},
		{"logging/setLevel", "application/json, text/event-stream", "2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"info"}}`, 200, `{}`, 0},
		{"completion/complete", "application/json, text/event-stream", "2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}}`, 200, `"values":[]`, 0},
		{"unknown method", "application/json, text/event-stream", "2025-11-25", `{"jsonrpc":"2.0","id":9,"method":"sampling/nothing"}`, 200, "", -32601},
		{"unknown method, JSON only", "application/json", "2025-06-18", `{"jsonrpc":"2.0","id":9,"method":"foo/bar"}`, 200, "", -32601},
	} {
		resp, body := post(t, u, "", c.body, map[string]string{"Accept": c.accept, "MCP-Protocol-Version": c.version})
		if resp.StatusCode != c.status {
			t.Errorf("%s: HTTP %d, want %d: %s", c.name, resp.StatusCode, c.status, body)
			continue
		}
		if c.status == http.StatusAccepted {
			continue
		}
		if ct := resp.Header.Get("Content-Type"); c.accept != "application/json, text/event-stream" && c.accept != "text/event-stream" && ct != "application/json" {
			t.Errorf("%s: Content-Type %q for a client that accepts JSON only", c.name, ct)
		}
		a := readAnswer(t, body)
		switch {
		case c.code != 0 && (a.Error == nil || a.Error.Code != c.code || string(a.ID) != "9"):
			t.Errorf("%s: %s, want error %d under id 9", c.name, body, c.code)
		case c.code == 0 && (a.Error != nil || !strings.Contains(string(a.Result), c.result)):
			t.Errorf("%s: %s, want a result with %s", c.name, body, c.result)
		}
	}

	// GET (the standalone stream) is 405 with Allow, as the spec lets a
	// server answer; DELETE of a session ends nothing and is 204.
	_, body = post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, nil)
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// Hostile bodies and headers: each gets a JSON-RPC error (or the HTTP
// status the spec names) and runs nothing; the door serves on.
func TestHostileBodies(t *testing.T) {
	t.Parallel()
	s, pr := fleet(t)
	ps := principals(t, fmt.Sprintf(`{"principals":[{"name":"alice","token_sha256":[%q],"agent_id":"agent-alice"},{"name":"bob","token_sha256":[%q],"agent_id":"agent-bob"}]}`,
		hash("alice-secret-token"), hash("bob-secret-token")))
	door := serveDoor(t, s, mcpdoor.Config{Principals: ps})
	u := door.URL + mcpdoor.Path
	const runWait = `"name":"wait","arguments":{"steps":0}`

	for _, c := range []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
		code   int
	}{
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{" + runWait + ",\"_meta\":{\"x\":\"\xff\xfe\"}}}", nil, 400, -32700},
		{"two name keys", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",` + runWait + `}}`, nil, 400, -32600},
		{"two method keys", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{` + runWait + `}}`, nil, 400, -32600},
		{"two keys deep in arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{"steps":0,"steps":1}}}`, nil, 400, -32600},
		{"nested 10000 deep", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + runWait + `,"_meta":{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}}}`, nil, 400, -32600},
		{"id beyond 64 bits", `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call","params":{` + runWait + `}}`, nil, 400, -32600},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{` + runWait + `}}`, nil, 400, -32600},
		{"boolean id", `{"jsonrpc":"2.0","id":true,"method":"tools/call","params":{` + runWait + `}}`, nil, 400, -32600},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{` + runWait + `}}`, nil, 400, -32600},
		{"data after the message", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + runWait + `}} {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + runWait + `}}`, nil, 400, -32700},
		{"no jsonrpc member", `{"id":1,"method":"tools/call","params":{` + runWait + `}}`, nil, 400, -32700},
		{"empty batch", `[]`, nil, 400, -32700},
		{"tools/call in a batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + runWait + `}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + runWait + `}}]`,
			map[string]string{"MCP-Protocol-Version": "2025-03-26"}, 400, -32600},
		{"odd turn key", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + runWait + `,"_meta":{"io.agentbull.toolruntime/turn":"../agent-bob/t\u0000"}}}`, nil, 200, -32602},
		{"Mcp-Method in another case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + runWait + `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "TOOLS/CALL", "Mcp-Name": "wait"}, 400, -32020},
		{"2025 tools/call under Mcp-Method tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + runWait + `}}`,
			map[string]string{"Mcp-Method": "tools/list"}, 400, -32020},
		{"2025 tools/call under Mcp-Method subscriptions/listen", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + runWait + `}}`,
			map[string]string{"MCP-Protocol-Version": "2025-03-26", "Mcp-Method": "subscriptions/listen"}, 400, -32020},
		{"Mcp-Name in another case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + runWait + `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "WAIT"}, 400, -32020},
		{"Mcp-Name escaped", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + runWait + `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": `w\u0061it`}, 400, -32020},
		{"Mcp-Name of the first of two name keys", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",` + runWait + `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}, 400, -32600},
	} {
		resp, body := post(t, u, "alice-secret-token", c.body, c.hdr)
		if resp.StatusCode != c.status {
			t.Errorf("%s: HTTP %d, want %d: %.300s", c.name, resp.StatusCode, c.status, body)
			continue
		}
		if a := readAnswer(t, body); a.Error == nil || a.Error.Code != c.code {
			t.Errorf("%s: %.300s, want error %d", c.name, body, c.code)
		} else if c.code == -32020 && string(a.ID) != "1" {
			// A header mismatch is answered under the request's id.
			t.Errorf("%s: id %s, want 1", c.name, a.ID)
		}
	}
	if n := pr.started.Load(); n != 0 {
		t.Fatalf("%d refused calls ran on the worker", n)
	}

	// A lone surrogate in an argument reaches the tool's argument check,
	// which says what is wrong; it runs nothing either.
	_, body := post(t, u, "alice-secret-token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\ud800"}}}`, nil)
	if !strings.Contains(body, `"isError":true`) || !strings.Contains(body, "surrogate") {
		t.Errorf("a lone surrogate: %.300s", body)
	}

	// A turn name is the principal's own: bob naming alice's turn gets a
	// turn of his agent.
	meta := `"_meta":{"io.agentbull.toolruntime/turn":"shared-turn"}`
	_, ab := post(t, u, "alice-secret-token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"where","arguments":{},`+meta+`}}`, nil)
	_, bb := post(t, u, "bob-secret-token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"where","arguments":{},`+meta+`}}`, nil)
	if !strings.Contains(ab, `agent-alice`) || !strings.Contains(bb, `agent-bob`) || strings.Contains(bb, "agent-alice") {
		t.Errorf("one turn name, two principals: alice %.200s, bob %.200s", ab, bb)
	}

	// A body that never ends holds its own request only: the door serves
	// the same principal and others meanwhile.
	conn, err := net.Dial("tcp", strings.TrimPrefix(door.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer alice-secret-token\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,",
		mcpdoor.Path, strings.TrimPrefix(door.URL, "http://"))
	time.Sleep(100 * time.Millisecond)
	for _, tok := range []string{"alice-secret-token", "bob-secret-token"} {
		if resp, body := post(t, u, tok, echoBody, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"text":"x"`) {
			t.Errorf("%s beside a body that never ends: %d %.200s", tok, resp.StatusCode, body)
		}
	}
	conn.Close()
	if resp, body := post(t, u, "alice-secret-token", echoBody, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("after it all: %d %s", resp.StatusCode, body)
	}
	if n := pr.started.Load(); n != 0 {
		t.Fatalf("%d refused calls ran on the worker", n)
	}
}

// A retry: the same JSON-RPC id again is a new request (the spec's ids
// are unique per request in flight, not forever) and runs again; the same
// call id in a named turn picks up the first attempt's outcome and runs
// nothing more, on either replica.
func TestRetrySameIDs(t *testing.T) {
	t.Parallel()
	s, pr := fleet(t)
	a, b := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"}), serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"})
	call := `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"wait","arguments":{"steps":0}}}`
	for _, u := range []string{a.URL, b.URL} {
		if resp, body := post(t, u+mcpdoor.Path, "", call, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"text":"done"`) {
			t.Fatalf("call: %d %s", resp.StatusCode, body)
		}
	}
	if n := pr.started.Load(); n != 2 {
		t.Fatalf("the same JSON-RPC id twice ran %d times, want 2", n)
	}
	named := `{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"wait","arguments":{"steps":0},"_meta":{"io.agentbull.toolruntime/turn":"retry-turn","io.agentbull.toolruntime/call":"retry-call-1"}}}`
	for i, u := range []string{a.URL, b.URL, a.URL} {
		resp, body := post(t, u+mcpdoor.Path, "", named, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"text":"done"`) {
			t.Fatalf("named call, attempt %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	if n := pr.started.Load(); n != 3 {
		t.Fatalf("one call id of a named turn, three attempts: ran %d times, want once", n-2)
	}
}
