package mcpdoor_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/mcpdoor"
)

// TestSessionIDs: a 2025-era initialize gets a session id that any
// request of the same principal may carry; another principal's, or a
// forged one, is an unknown session (404); DELETE answers 204.
func TestSessionIDs(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	a, b := twoReplicas(t, s)
	resp, body := post(t, a.URL+mcpdoor.Path, "alice-secret-token", initialize, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" || !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize: %d %q %s", resp.StatusCode, sid, body)
	}
	if resp, body := post(t, b.URL+mcpdoor.Path, "alice-secret-token", listBody, map[string]string{"Mcp-Session-Id": sid}); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"echo"`) {
		t.Fatalf("the session on the other replica: %d %s", resp.StatusCode, body)
	}
	for name, c := range map[string]struct{ tok, sid string }{
		"other principal": {"bob-secret-token", sid},
		"forged":          {"alice-secret-token", sid[:len(sid)-2] + "AA"},
	} {
		if resp, _ := post(t, b.URL+mcpdoor.Path, c.tok, listBody, map[string]string{"Mcp-Session-Id": c.sid}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", name, resp.StatusCode)
		}
	}
	del := func(token string) int {
		req, _ := http.NewRequest(http.MethodDelete, b.URL+mcpdoor.Path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := del("bob-secret-token"); code != http.StatusNotFound {
		t.Fatalf("DELETE of another principal's session: %d, want 404", code)
	}
	if code := del("alice-secret-token"); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d", code)
	}
}

// TestRoutedCancelIsThePrincipalsOwn: a 2025-era notifications/cancelled
// cancels the call of the same principal's session with that request id,
// on any replica, whatever JSON escapes spell the id; another
// principal's cancel of the same id, in its own session or in the
// caller's, cancels nothing.
func TestRoutedCancelIsThePrincipalsOwn(t *testing.T) {
	s, pr := fleet(t)
	a, b := twoReplicas(t, s)
	session := func(token string) string {
		resp, body := post(t, a.URL+mcpdoor.Path, token, initialize, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize: %d %s", resp.StatusCode, body)
		}
		return resp.Header.Get("Mcp-Session-Id")
	}
	sidA, sidB := session("alice-secret-token"), session("bob-secret-token")
	done := make(chan string, 1)
	go func() {
		const held = `{"jsonrpc":"2.0","id":"call-5","method":"tools/call","params":{"name":"wait","arguments":{"steps":0,"hold":true}}}`
		resp, err := http.DefaultClient.Do(withSession(mcpPost(a.URL+mcpdoor.Path, "alice-secret-token", "2025-11-25", held), sidA))
		if err != nil {
			done <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(body)
	}()
	eventually(t, "the held call started", func() bool { return pr.started.Load() == 1 })
	cancelOf := func(id string) string {
		return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"test"}}`
	}
	for name, c := range map[string]struct {
		token, sid string
		want       int
	}{
		"bob in his session":      {"bob-secret-token", sidB, http.StatusAccepted},
		"bob in alice's":          {"bob-secret-token", sidA, http.StatusNotFound},
		"alice in bob's":          {"alice-secret-token", sidB, http.StatusNotFound},
		"alice without a session": {"alice-secret-token", "", http.StatusAccepted},
	} {
		resp, err := http.DefaultClient.Do(withSession(mcpPost(b.URL+mcpdoor.Path, c.token, "2025-11-25", cancelOf(`"call-5"`)), c.sid))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, c.want)
		}
	}
	// Those cancels went nowhere; a cancel that reached the call would
	// end it well within this.
	time.Sleep(500 * time.Millisecond)
	if n := pr.cancelled.Load(); n != 0 {
		t.Fatalf("another principal's cancel ended the call (%d cancelled)", n)
	}
	resp, err := http.DefaultClient.Do(withSession(mcpPost(b.URL+mcpdoor.Path, "alice-secret-token", "2025-11-25", cancelOf(`"call\u002d5"`)), sidA))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	eventually(t, "alice's own cancel ended her call", func() bool { return pr.cancelled.Load() == 1 })
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled call's request never ended")
	}
}

func withSession(r *http.Request, sid string) *http.Request {
	if sid != "" {
		r.Header.Set("Mcp-Session-Id", sid)
	}
	return r
}

// initialize is a 2025-era initialize request.
const initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// twoReplicas serves two doors over s, sharing one seal key, for the
// principals alice and bob.
func twoReplicas(t *testing.T, s *natstest.Server) (a, b *httptest.Server) {
	t.Helper()
	ps := principals(t, fmt.Sprintf(`{"principals":[
		{"name":"alice","token_sha256":[%q],"agent_id":"agent-alice"},
		{"name":"bob","token_sha256":[%q],"agent_id":"agent-bob"}]}`, hash("alice-secret-token"), hash("bob-secret-token")))
	return serveDoor(t, s, mcpdoor.Config{Principals: ps, SealKey: sealKey}),
		serveDoor(t, s, mcpdoor.Config{Principals: ps, SealKey: sealKey})
}
