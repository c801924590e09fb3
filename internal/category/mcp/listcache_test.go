package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/internal/category/mcp"
)

// cacheServer is a 2026-07-28 server whose tool lists carry ttlMs and
// cacheScope, counting the tools/list requests it answers.
func cacheServer(t *testing.T, ttlMs int, scope string) (*httptest.Server, *atomic.Int32, *atomic.Bool) {
	t.Helper()
	var lists atomic.Int32
	var down atomic.Bool
	srv := sdk.NewServer(&sdk.Implementation{Name: "cache-server", Version: "1"}, &sdk.ServerOptions{
		SetCacheable: func(_ context.Context, _ sdk.Request, c *sdk.Cacheable) { c.TTLMs, c.CacheScope = ttlMs, scope },
	})
	srv.AddTool(&sdk.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "x"}}}, nil
		})
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "tools/list" {
				lists.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs, &lists, &down
}

// TestListTTL: a list with ttlMs 0 is read again for every turn; one
// with a long ttlMs is read once.
func TestListTTL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ttl  int
		want int32
	}{{0, 3}, {3_600_000, 1}} {
		hs, lists, _ := cacheServer(t, tt.ttl, "public")
		m := newManager(t, map[string]mcp.ServerConfig{"c": {URL: hs.URL}})
		for range 3 {
			if set := assemble(t, m, textContext("c")); len(set.Tools()) != 1 {
				t.Fatalf("ttl %d: %d tools", tt.ttl, len(set.Tools()))
			}
		}
		if got := lists.Load(); got != tt.want {
			t.Errorf("ttl %d: %d tools/list requests, want %d", tt.ttl, got, tt.want)
		}
	}
}

// TestPrivateListNotOfferedWhileDown: while a server is down, its last
// public list is offered from memory, but a private one (its credential
// owner's) is not.
func TestPrivateListNotOfferedWhileDown(t *testing.T) {
	t.Parallel()
	for _, scope := range []string{"public", "private"} {
		hs, _, down := cacheServer(t, 0, scope)
		m := newManager(t, map[string]mcp.ServerConfig{"c": {URL: hs.URL}})
		if set := assemble(t, m, textContext("c")); len(set.Tools()) != 1 {
			t.Fatalf("%s: %d tools", scope, len(set.Tools()))
		}
		down.Store(true)
		set := assemble(t, m, textContext("c"))
		notes := set.Notes
		switch {
		case scope == "public" && len(set.Tools()) != 1:
			t.Errorf("public: %d tools while down; notes %q", len(set.Tools()), notes)
		case scope == "private" && (len(set.Tools()) != 0 || !strings.Contains(strings.Join(notes, " "), "left out")):
			t.Errorf("private: %d tools while down; notes %q", len(set.Tools()), notes)
		}
	}
}
