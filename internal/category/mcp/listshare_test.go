package mcp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/protocol"
)

// An owner who has connected no account, on a worker that never listed
// the server, calls one of its tools: the call ends auth_required with
// the auth.required event (the list another owner's session kept in the
// vault offers the tool), not unknown_tool.
func TestUnconnectedFirstCallOnAFreshWorkerNeedsAnAccount(t *testing.T) {
	w := newOAuthWorld(t)
	r := startAuthRig(t, w, mcp.OAuthConfig{Owner: mcp.OwnerFairness})
	ctx := context.Background()
	if err := r.conn.Connect(ctx, "acct", mcp.OwnerFor(r.cfg.Servers["acct"].OAuth, "a1", "tenant-A"), browser("alice")); err != nil {
		t.Fatal(err)
	}
	if out := callOutput(t, r.step("a1", "tenant-A", "t1", 0)); out.Status != "ok" {
		t.Fatalf("tenant A: %+v", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := r.vault.GetList(ctx, "acct")
		if err != nil {
			t.Fatal(err)
		}
		if b != nil {
			if !strings.Contains(string(b), `"whoami"`) {
				t.Fatalf("kept list: %s", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the list was never kept")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A fresh worker replaces the first one: it never listed acct.
	r.stop()
	startAuthWorker(t, r.nc, r.cfg, r.vault, r.guard)
	evs := r.step("b1", "tenant-B", "t1", 0)
	if len(evs) != 3 || evs[0].Type != protocol.EventAuthRequired || evs[1].Type != protocol.EventCallOutput {
		t.Fatalf("tenant B's events: %+v", evs)
	}
	if out := evs[1]; out.Error == nil || out.Error.Kind != string(protocol.AuthRequired) {
		t.Fatalf("tenant B's call.output: %+v", out)
	}
	if got := strings.Join(w.users(), ","); got != "alice" {
		t.Fatalf("the server saw %q", got)
	}
}
