package mcpdoor_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/mcpdoor"
)

const echoBody = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCancelAndInFlight holds one call of a principal whose bound is 1:
// its next request gets 429; closing the held call's request cancels
// the call on the worker.
func TestCancelAndInFlight(t *testing.T) {
	s, pr := fleet(t)
	ps := principals(t, fmt.Sprintf(`{"principals":[{"name":"alice","token_sha256":[%q],"agent_id":"agent-alice","max_in_flight":1}]}`, hash("alice-secret-token")))
	door := serveDoor(t, s, mcpdoor.Config{Principals: ps})
	cs := connect(t, door.URL, &http.Client{Transport: bearer{"alice-secret-token"}})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{"steps": 0, "hold": true}})
		errc <- err
	}()
	eventually(t, "the held call started", func() bool { return pr.started.Load() == 1 })

	// Other requests are not counted; a second call is.
	if resp, _ := post(t, door.URL+mcpdoor.Path, "alice-secret-token", listBody, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/list beside a held call: %d", resp.StatusCode)
	}
	resp, body := post(t, door.URL+mcpdoor.Path, "alice-secret-token", echoBody, nil)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"code":-32000`) {
		t.Fatalf("over the bound: %d %s", resp.StatusCode, body)
	}

	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	eventually(t, "the worker's call was cancelled", func() bool { return pr.cancelled.Load() == 1 })
	// The bound is free again.
	eventually(t, "the bound is free", func() bool {
		resp, _ := post(t, door.URL+mcpdoor.Path, "alice-secret-token", echoBody, nil)
		return resp.StatusCode == http.StatusOK
	})
}

// TestCaseFoldedMethodIsACall: the SDK reads "method" as written, so a
// 2025-era body (no Mcp-Method header) naming tools/call under "method"
// and tools/list under "Method" runs a call; the door must count it as
// one (encoding/json would read the list), so over the principal's bound
// it is refused and runs nothing.
func TestCaseFoldedMethodIsACall(t *testing.T) {
	t.Parallel()
	s, pr := fleet(t)
	ps := principals(t, fmt.Sprintf(`{"principals":[{"name":"alice","token_sha256":[%q],"agent_id":"agent-alice","max_in_flight":1}]}`, hash("alice-secret-token")))
	door := serveDoor(t, s, mcpdoor.Config{Principals: ps})
	cs := connect(t, door.URL, &http.Client{Transport: bearer{"alice-secret-token"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{"steps": 0, "hold": true}})
	}()
	eventually(t, "the held call started", func() bool { return pr.started.Load() == 1 })
	const folded = `{"jsonrpc":"2.0","id":3,"method":"tools/call","Method":"tools/list","params":{"name":"wait","arguments":{"steps":0}}}`
	resp, body := post(t, door.URL+mcpdoor.Path, "alice-secret-token", folded, nil)
	if resp.StatusCode != http.StatusTooManyRequests || pr.started.Load() != 1 {
		t.Fatalf("a call spelled as a list beside a held call: %d %s, %d calls started", resp.StatusCode, body, pr.started.Load())
	}
}

func TestHostOriginAndBody(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	door := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev", MaxBodyBytes: 4 << 10})
	u := door.URL + mcpdoor.Path
	for _, c := range []struct {
		name   string
		hdr    map[string]string
		body   string
		status int
	}{
		{"loopback", nil, listBody, http.StatusOK},
		{"localhost Host", map[string]string{"Host": "localhost:1"}, listBody, http.StatusOK},
		{"rebinding Host", map[string]string{"Host": "evil.example"}, listBody, http.StatusForbidden},
		{"foreign Origin", map[string]string{"Origin": "https://evil.example"}, listBody, http.StatusForbidden},
		{"own Origin", map[string]string{"Origin": door.URL}, listBody, http.StatusOK},
		{"large body", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"x":"` + strings.Repeat("a", 8<<10) + `"}}}`, http.StatusRequestEntityTooLarge},
		{"not JSON", nil, `{"jsonrpc":`, http.StatusBadRequest},
	} {
		resp, body := post(t, u, "", c.body, c.hdr)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d: %s", c.name, resp.StatusCode, c.status, body)
		}
	}
}

// TestDevPrincipalLoopbackOnly: a request that did not arrive on a
// loopback address is refused while the door has a dev principal.
func TestDevPrincipalLoopbackOnly(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	d, err := mcpdoor.New(mcpdoor.Config{NC: s.Connect(t), DevPrincipal: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "http://10.0.0.5:8471/mcp", strings.NewReader(listBody))
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 8471}))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	w := httptest.NewRecorder()
	d.ServeHTTP(w, req)
	if w.Code != http.StatusForbidden {
		t.Fatalf("dev principal off loopback: %d %s", w.Code, w.Body)
	}
}

// TestCancelNamedTurnCall: cancelling one call of a named turn aborts
// that call's step only; the turn's other call runs on, and the turn
// takes later calls.
func TestCancelNamedTurnCall(t *testing.T) {
	s, pr := fleet(t)
	door := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"})
	cs := connect(t, door.URL, nil)
	meta := mcp.Meta{mcpdoor.MetaTurn: "long-turn"}
	hold := func(ctx context.Context, errc chan<- error) {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{"steps": 0, "hold": true}, Meta: meta})
		errc <- err
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	errA, errB := make(chan error, 1), make(chan error, 1)
	go hold(ctxA, errA)
	eventually(t, "call A started", func() bool { return pr.started.Load() == 1 })
	go hold(ctxB, errB)
	eventually(t, "call B started", func() bool { return pr.started.Load() == 2 })

	cancelA()
	<-errA
	eventually(t, "call A cancelled", func() bool { return pr.cancelled.Load() == 1 })
	time.Sleep(500 * time.Millisecond) // B would be aborted by now if the cancel reached it
	if n := pr.cancelled.Load(); n != 1 {
		t.Fatalf("%d calls cancelled, want A only", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}, Meta: meta})
	if err != nil || res.IsError {
		t.Fatalf("the turn after a cancelled call: %v %v", err, res)
	}
	cancelB()
	<-errB
	eventually(t, "call B cancelled", func() bool { return pr.cancelled.Load() == 2 })
}

// TestNoStreamLeftOpen: no request of a client holds a stream open on
// the door for as long as the client likes. A subscriptions/listen
// (2026-07-28), which bounded lets past the principal's gates, ends at
// once: the door offers nothing to listen to (no list_changed, no
// resource subscriptions), so the SDK acknowledges and completes it.
// Should the door ever offer some, listen streams need a bound of their
// own, and this test says so. A GET stream, or its resumption by
// Last-Event-ID (of any session), is not served: a stateless door
// answers 405 at once.
func TestNoStreamLeftOpen(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	ps := principals(t, fmt.Sprintf(`{"principals":[{"name":"alice","token_sha256":[%q],"agent_id":"agent-alice","max_in_flight":2}]}`, hash("alice-secret-token")))
	door := serveDoor(t, s, mcpdoor.Config{Principals: ps})
	const listen = `{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["file:///etc/passwd"]}}}`
	for i := range 5 { // more than the principal's bound: none stays open
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		req := mcpPost(door.URL+mcpdoor.Path, "alice-secret-token", "2026-07-28", fmt.Sprintf(listen, i+1)).WithContext(ctx)
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body) // to the stream's end
		resp.Body.Close()
		cancel()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), fmt.Sprintf(`"id":%d,"result"`, i+1)) {
			t.Fatalf("listen %d: %d %v %s", i+1, resp.StatusCode, err, b)
		}
	}
	for _, lastID := range []string{"", "0_0", "another-session_5"} {
		req, _ := http.NewRequest(http.MethodGet, door.URL+mcpdoor.Path, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer alice-secret-token")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET (Last-Event-ID %q): %d, want 405", lastID, resp.StatusCode)
		}
	}
}
