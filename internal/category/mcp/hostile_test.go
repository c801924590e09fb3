package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/category/mcp"
)

// hostileServer is a stdio MCP server written by hand, for what the SDK's
// server would not send: a tools/list whose every page has a next cursor,
// with tools of the mode's kind:
//
//   - cursor: small tools, 5 a page;
//   - huge: a tool with a 72 KiB description (9 times the most kept)
//     and one with a 375 KiB schema (1.5 times the most kept) on every
//     page;
//   - slow: small tools, each page 100 ms late.
func hostileServer(mode string) int {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	page := 0
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return 0
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &req) != nil || req.ID == nil {
			continue // a notification
		}
		var result any
		switch req.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "hostile", "version": "6.6.6"}}
		case "tools/list":
			page++
			var ts []map[string]any
			for i := range 5 {
				ts = append(ts, map[string]any{"name": fmt.Sprintf("t%d_%d", page, i), "description": "A tool.", "inputSchema": map[string]any{"type": "object"}})
			}
			switch mode {
			case "huge":
				props := map[string]any{}
				for i := range 5000 {
					props[fmt.Sprintf("p%06d", i)] = map[string]any{"type": "string", "description": strings.Repeat("s", 40)}
				}
				ts = append(ts,
					map[string]any{"name": fmt.Sprintf("long%d", page), "description": strings.Repeat("describe ", 1<<13), "inputSchema": map[string]any{"type": "object"}},
					map[string]any{"name": fmt.Sprintf("wide%d", page), "description": "Wide.", "inputSchema": map[string]any{"type": "object", "properties": props}})
			case "slow":
				time.Sleep(100 * time.Millisecond)
			case "flood":
				// Before the page: notifications of every kind a client
				// may get, and requests it never asked for.
				for i := range 600 { // 600 × 4 messages: far past a pipe's 64 KiB
					for _, m := range []string{
						`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("x", 200) + `"}}`,
						`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tr-guess` + fmt.Sprint(i) + `","progress":1}}`,
						`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
						`{"jsonrpc":"2.0","id":"s` + fmt.Sprint(i) + `","method":"roots/list"}`,
					} {
						out.WriteString(m + "\n")
					}
				}
			}
			result = map[string]any{"tools": ts, "nextCursor": fmt.Sprintf("c%d", page)}
		default:
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "no"}})
			out.Write(append(b, '\n'))
			out.Flush()
			continue
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		out.Write(append(b, '\n'))
		out.Flush()
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestHostileListings puts a hostile server beside the normal one: each
// listing stops at its bound, keeps what fits and says so in a note, the
// worker's heap stays bounded, and the normal server's tools work.
func TestHostileListings(t *testing.T) {
	for _, tt := range []struct {
		mode string
		opts mcp.Options
		note string
		min  int // tools kept, at least
	}{
		{"cursor", mcp.Options{}, "it gives more than 20 pages", 100},
		{"cursor", mcp.Options{MaxListTools: 12}, "it lists more than 12 tools", 12},
		// A bound of 640 KiB, not the default 4 MiB, met on the second
		// page (each is ~500 KiB): the same cut with a tenth of the bytes
		// to make and parse.
		{"huge", mcp.Options{MaxListBytes: 640 << 10}, "its tool definitions pass 655360 bytes", 5},
		// 1 s: pages 100 ms apart meet it after ~10, not the first.
		{"slow", mcp.Options{ListTimeout: time.Second}, "listing took longer than 1s", 5},
		// Answering its requests, unread, the worker may stall on the
		// pipe: a flood costs the flooder time, whichever bound it meets.
		{"flood", mcp.Options{MaxListPages: 3}, "", 5},
	} {
		t.Run(tt.mode+tt.note[max(len(tt.note)-8, 0):], func(t *testing.T) {
			good, _ := stdioConfig(t)
			bad := mcp.ServerConfig{Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{serverEnv: "hostile-" + tt.mode}}
			o := tt.opts
			o.Logger, o.Version = testLogger(t), "test"
			m, err := mcp.NewManager(mcp.Config{Servers: map[string]mcp.ServerConfig{"go": good, "bad": bad}}, o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			before := heapInUse()
			set := assemble(t, m, textContext("go", "bad"))
			after := heapInUse()
			// Two listings' worth of bounds (4 MiB each, one 16 MiB
			// message) and the compiled schemas, with room to spare.
			if after > before+96<<20 {
				t.Errorf("the heap grew from %d to %d MiB", before>>20, after>>20)
			}
			notes := strings.Join(set.Notes, "\n")
			want := `mcp server "bad": its tool list was cut short (` + tt.note
			if tt.note != "" {
				want += ")"
			}
			if !strings.Contains(notes, want) {
				t.Errorf("notes %q lack the cut", notes)
			}
			n := 0
			for _, tool := range set.Tools() {
				if tool.Spec().Namespace == "bad" {
					n++
					if d := tool.Spec().Description; len(d) > mcp.MaxToolDescription {
						t.Errorf("%s: a description of %d bytes", tool.Name(), len(d))
					}
				}
			}
			if n < tt.min {
				t.Errorf("%d tools of the hostile server kept, want at least %d", n, tt.min)
			}
			if tt.mode == "huge" && !strings.Contains(notes, "its input schema is") {
				t.Errorf("notes %q do not say the huge schema was left out", notes)
			}
			o1 := dispatch(context.Background(), set, "go", "echo", `{"text":"still here"}`)
			if kind(o1) != "" || output(t, o1) != "still here" {
				t.Errorf("the normal server's echo: %s %q", kind(o1), output(t, o1))
			}
			t.Logf("%d hostile tools kept; heap %d → %d MiB", n, before>>20, after>>20)
		})
	}
}

// An HTTP server whose tools/list answer is one JSON response larger
// than MaxMessageBytes: the response fails without being read whole, the
// server is unavailable for the turn, and the heap stays bounded.
func TestHTTPResponseBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if req.Method == "initialize" {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"big","version":"1"}}}`, req.ID)
			return
		}
		if req.Method != "tools/list" {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, req.ID)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"x","inputSchema":{"type":"object"},"description":"`, req.ID)
		chunk := []byte(strings.Repeat("y", 1<<20))
		for range 64 { // 64 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		fmt.Fprint(w, `"}]}}`)
	}))
	t.Cleanup(srv.Close)
	m, err := mcp.NewManager(mcp.Config{Servers: map[string]mcp.ServerConfig{"big": {URL: srv.URL}}},
		mcp.Options{Logger: testLogger(t), Version: "test", MaxMessageBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	before := heapInUse()
	set := assemble(t, m, textContext("big"))
	after := heapInUse()
	if after > before+32<<20 {
		t.Errorf("the heap grew from %d to %d MiB", before>>20, after>>20)
	}
	notes := strings.Join(set.Notes, "\n")
	if len(set.Tools()) != 0 || !strings.Contains(notes, `mcp server "big" is unavailable`) {
		t.Errorf("tools %d, notes %q", len(set.Tools()), notes)
	}
	t.Logf("heap %d → %d MiB; %s", before>>20, after>>20, notes)
}
