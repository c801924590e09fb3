package mcpdoor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/mcpdoor"
	"github.com/agentbull/toolruntime/tool"
)

type keyParams struct {
	Key string `json:"key" jsonschema:"description=The key to look up.,maxLength=100"`
}

// deferredFleet is a worker whose catalog has a plain tool and three
// deferred ones, one of them in a namespace, so that it ends with a
// tool_search entry.
func deferredFleet(t *testing.T) *natstest.Server {
	t.Helper()
	mk := func(name, ns, desc string) *tool.Tool {
		return tool.Must(tool.Def[keyParams]{
			Spec: tool.Spec{Name: name, Namespace: ns, NamespaceDescription: "The inventory.", Description: desc, ReadOnly: true, DeferLoading: ns != "" || name != "echo"},
			Execute: func(ctx context.Context, p keyParams) (tool.Result, error) {
				return tool.Result{Content: name + ":" + p.Key}, nil
			},
		})
	}
	all := []*tool.Tool{
		mk("echo", "", "Echo the key."),
		mk("lookup_price", "", "Look up a price by key."),
		mk("lookup_price_history", "", "Look up the past prices of a key."),
		mk("count_stock", "inventory", "Count the stock of an item."),
	}
	s := natstest.Start(t)
	workertest.RunWorker(t, s, "w1", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{{Name: "deferred_test", Tools: func(context.Context, tool.Turn) ([]*tool.Tool, error) { return all, nil }}}, nil
	})
	return s
}

// TestDeferredTools: every tool the principal may use is listed, deferred
// ones with an open schema and _meta marking them, and tool_search; the
// list's bytes are the same on both replicas; a deferred tool called by
// name runs (the door loads it first), in a fresh turn and in a named
// one; tool_search answers with the full definitions.
func TestDeferredTools(t *testing.T) {
	t.Parallel()
	s := deferredFleet(t)
	a := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev", SealKey: sealKey})
	b := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev", SealKey: sealKey})
	url := alternate(t, a, b).URL
	cs := connect(t, url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
		deferred := tl.Name != "echo" && tl.Name != mcpdoor.ToolSearchName
		if (tl.Meta[mcpdoor.MetaDeferred] == true) != deferred {
			t.Errorf("%s: _meta %v", tl.Name, tl.Meta)
		}
	}
	if got, want := strings.Join(names, ","), "echo,inventory.count_stock,lookup_price,lookup_price_history,tool_search"; got != want {
		t.Fatalf("tools %s, want %s", got, want)
	}
	// The same bytes from either replica, every time.
	list := func() string {
		resp, body := post(t, url+mcpdoor.Path, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("tools/list: %d %s", resp.StatusCode, body)
		}
		return body
	}
	first := list()
	for range 3 {
		if got := list(); got != first {
			t.Fatalf("tools/list differs:\n%s\n%s", first, got)
		}
	}

	for _, c := range []struct {
		name string
		meta mcp.Meta
	}{
		{"lookup_price", nil},
		{"lookup_price_history", nil},
		{"inventory.count_stock", nil},
		{"lookup_price", mcp.Meta{mcpdoor.MetaTurn: "deferred-turn"}},
		{"lookup_price_history", mcp.Meta{mcpdoor.MetaTurn: "deferred-turn"}},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.name, Arguments: map[string]any{"key": "k1"}, Meta: c.meta})
		if err != nil {
			t.Fatal(err)
		}
		want := c.name[strings.LastIndex(c.name, ".")+1:] + ":k1"
		if res.IsError || text(t, res) != want {
			t.Fatalf("%s (meta %v): isError %v, %q", c.name, c.meta, res.IsError, text(t, res))
		}
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpdoor.ToolSearchName, Arguments: map[string]any{"query": "price history"}})
	if err != nil {
		t.Fatal(err)
	}
	var found struct {
		Tools []struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"tools"`
	}
	if res.IsError || json.Unmarshal([]byte(text(t, res)), &found) != nil || len(found.Tools) == 0 ||
		found.Tools[0].Name != "lookup_price_history" || !strings.Contains(string(found.Tools[0].Parameters), "The key to look up.") {
		t.Fatalf("tool_search: %q", text(t, res))
	}
}
