package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/tokenvault"
)

// A token endpoint that hangs, answers too much, or redirects to a
// loopback address the guard does not allow ends the one call whose
// token it should refresh, with an error that says so, within the
// server's oauth timeout; the other tenant's calls, running beside it,
// are answered as usual.
func TestHostileTokenEndpointEndsOneCall(t *testing.T) {
	private := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		t.Error("the guard let a redirect reach a loopback address it does not allow")
	}))
	defer private.Close()
	stop := make(chan struct{}) // ends the hanging handler
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want string
	}{
		{"hang", func(rw http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		}, "did not answer in time"},
		{"oversized", func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "application/json")
			_, _ = rw.Write([]byte(`{"access_token":"` + strings.Repeat("x", 1<<20) + `"}`))
		}, "larger than the worker takes"},
		{"redirect", func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, private.URL+"/token", http.StatusTemporaryRedirect)
		}, "is a loopback address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newOAuthWorld(t)
			t.Cleanup(func() {
				select {
				case <-stop:
				default:
					close(stop)
				}
			})
			r := startAuthRig(t, w, mcp.OAuthConfig{Owner: mcp.OwnerFairness, Timeout: mcp.Duration(time.Second), MaxResponseBytes: 64 << 10})
			ctx := context.Background()
			oauth := r.cfg.Servers["acct"].OAuth
			if err := r.conn.Connect(ctx, "acct", mcp.OwnerFor(oauth, "a1", "tenant-A"), browser("alice")); err != nil {
				t.Fatal(err)
			}
			// Tenant C's token expired; refreshing it meets the hostile
			// endpoint.
			w.mu.Lock()
			w.tokenHandler = tc.h
			w.mu.Unlock()
			if err := r.vault.Put(ctx, "acct", mcp.OwnerFor(oauth, "c1", "tenant-C"), &tokenvault.Token{AccessToken: "stale", RefreshToken: "r",
				Expiry: time.Now().Add(-time.Minute), TokenURL: w.as.URL + "/token", ClientID: "pre", ClientSecret: "s3cret"}); err != nil {
				t.Fatal(err)
			}
			// A's first call lists the server's tools, so that C's turn
			// offers them (C's own listing cannot run).
			if got := outputText(t, callOutput(t, r.step("a1", "tenant-A", "t0", 0))); got != "you are alice" {
				t.Fatalf("tenant A: %q", got)
			}
			var wg sync.WaitGroup
			var aText string
			wg.Go(func() {
				aText = outputText(t, callOutput(t, r.step("a1", "tenant-A", "t1", 0)))
			})
			out := callOutput(t, r.step("c1", "tenant-C", "t1", 0))
			wg.Wait()
			if out.Status != "error" || out.Error == nil || !strings.Contains(out.Error.Message, "could not be refreshed") || !strings.Contains(out.Error.Message, tc.want) {
				t.Fatalf("tenant C: %+v", out.Error)
			}
			if aText != "you are alice" {
				t.Fatalf("tenant A beside it: %q", aText)
			}
		})
	}
}
