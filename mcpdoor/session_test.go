package mcpdoor_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/mcpdoor"
)

// TestSessionIDs: a 2025-era initialize gets a session id that any
// request of the same principal may carry; another principal's, or a
// forged one, is an unknown session (404); DELETE answers 204.
func TestSessionIDs(t *testing.T) {
	s, _ := fleet(t)
	ps := principals(t, fmt.Sprintf(`{"principals":[
		{"name":"alice","token_sha256":[%q],"agent_id":"agent-alice"},
		{"name":"bob","token_sha256":[%q],"agent_id":"agent-bob"}]}`, hash("alice-secret-token"), hash("bob-secret-token")))
	a := serveDoor(t, s, mcpdoor.Config{Principals: ps, SealKey: sealKey})
	b := serveDoor(t, s, mcpdoor.Config{Principals: ps, SealKey: sealKey})
	const initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
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
	req, _ := http.NewRequest(http.MethodDelete, b.URL+mcpdoor.Path, nil)
	req.Header.Set("Authorization", "Bearer alice-secret-token")
	req.Header.Set("Mcp-Session-Id", sid)
	dresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dresp.Body.Close()
	if dresp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", dresp.StatusCode)
	}
}
