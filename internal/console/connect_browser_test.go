package console_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/protocol"
)

// browserConnect runs testdata/connect.mjs against the rig's console.
func browserConnect(t *testing.T, r *connectRig, chromium, npmDir string) (out struct {
	Dialogs                       []string
	Before, LinkHost, CallbackURL string
	Callback, After               string
	Scripts, Imgs                 int
}) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b := runBrowser(ctx, t, "connect.mjs", r.url, npmDir, chromium)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("browser script output %q: %v", b, err)
	}
	return out
}

// TestBrowserConnect connects a tenant's account in Chromium: the
// Connect button, the link to the authorization server, its redirect to
// the console's callback (the console's policy, no inline script, lets
// all of it through), the page saying connected; then the worker's next
// call carries the account's token, with no restart. An authorization
// server's refusal with markup in its description is shown as text,
// and runs nothing.
func TestBrowserConnect(t *testing.T) {
	t.Parallel()
	chromium, npmDir := browserTools(t)
	t.Run("connect", func(t *testing.T) {
		r := startConnectRig(t)
		r.a.mu.Lock()
		r.a.browserUser = "carol"
		r.a.mu.Unlock()
		out := browserConnect(t, r, chromium, npmDir)
		if !strings.Contains(out.Before, "acct") || !strings.Contains(out.Before, "not connected") {
			t.Fatalf("the page before: %q", out.Before)
		}
		if !strings.Contains(out.LinkHost, strings.TrimPrefix(r.a.as.URL, "http://")) {
			t.Fatalf("the link names %q, not the authorization server", out.LinkHost)
		}
		if !strings.HasPrefix(out.CallbackURL, r.url+"/connect/callback?") || !strings.Contains(out.Callback, "Connected") {
			t.Fatalf("the callback %s: %q", out.CallbackURL, out.Callback)
		}
		if !strings.Contains(out.After, "connected, scopes read") || !strings.Contains(out.After, "Disconnect") {
			t.Fatalf("the page after: %q", out.After)
		}
		if len(out.Dialogs) > 0 || out.Scripts != 0 || out.Imgs != 0 {
			t.Fatalf("dialogs %v, %d scripts and %d images on the callback page", out.Dialogs, out.Scripts, out.Imgs)
		}
		if o, ar := r.call(t, "a1", "tenant-A", 0); o.Status != protocol.StatusOK || ar != nil {
			t.Fatalf("the call after connecting in the browser: %+v", o)
		}
		if got := r.a.users(); got != "carol" {
			t.Fatalf("the server saw the tokens of %q, want carol", got)
		}
	})
	t.Run("refused", func(t *testing.T) {
		r := startConnectRig(t)
		r.a.mu.Lock()
		r.a.refuse = [2]string{"access_denied", `<img src=x onerror=alert(1)><script>alert(2)</script>`}
		r.a.mu.Unlock()
		out := browserConnect(t, r, chromium, npmDir)
		if !strings.Contains(out.Callback, "Not connected") || !strings.Contains(out.Callback, `<img src=x onerror=alert(1)><script>alert(2)</script>`) {
			t.Fatalf("the callback: %q", out.Callback)
		}
		if len(out.Dialogs) > 0 || out.Scripts != 0 || out.Imgs != 0 {
			t.Fatalf("dialogs %v, %d scripts and %d images on the callback page", out.Dialogs, out.Scripts, out.Imgs)
		}
		if !strings.Contains(out.After, "not connected") {
			t.Fatalf("the page after a refusal: %q", out.After)
		}
	})
}
