package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/web"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// searxng serves SearXNG-shaped JSON at /searx/search and records the
// queries it got.
func searxng(t *testing.T, results int) (*server, *[]string) {
	t.Helper()
	var queries []string
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/searx/search" || r.URL.Query().Get("format") != "json" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		q := r.URL.Query().Get("q")
		queries = append(queries, q)
		type result struct {
			URL     string `json:"url"`
			Title   string `json:"title"`
			Content string `json:"content"`
			Engine  string `json:"engine"`
		}
		var rs []result
		for i := range results {
			rs = append(rs, result{URL: fmt.Sprintf("https://example.com/%d", i), Title: fmt.Sprintf("Result\n %d for %s", i, q), Content: "About " + q + ".", Engine: "duckduckgo"})
		}
		// A repeat and a result without a URL are skipped.
		rs = append([]result{rs[0], {Title: "no url"}}, rs...)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"query": q, "number_of_results": len(rs), "results": rs, "answers": []any{}, "suggestions": []string{"x"}})
	})
	return s, &queries
}

func search(t *testing.T, c *web.Category, args string) (tool.Result, error) {
	t.Helper()
	inv, err := tools.Prepare(webTool(t, c, web.SearchName), args, 0)
	if err != nil {
		return tool.Result{}, err
	}
	return inv.Run(context.Background())
}

func TestSearXNGSearch(t *testing.T) {
	s, queries := searxng(t, 30)
	c := newWeb(t, web.Config{SearchURL: s.URL + "/searx/"})
	res, err := search(t, c, `{"query":"nats jetstream"}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(*queries) != 1 || (*queries)[0] != "nats jetstream" {
		t.Errorf("queries %q", *queries)
	}
	d, okd := res.Details.(*web.SearchDetails)
	if !okd || len(d.Results) != web.DefaultResults {
		t.Fatalf("details %+v", res.Details)
	}
	want := "1. Result 0 for nats jetstream\n   https://example.com/0\n   About nats jetstream.\n2. Result 1 for nats jetstream\n   https://example.com/1\n"
	if !strings.HasPrefix(res.Content, want) {
		t.Errorf("content:\n%s\nwant it to start with:\n%s", res.Content, want)
	}
	if strings.Contains(res.Content, "no url") || strings.Count(res.Content, "https://example.com/0\n") != 1 {
		t.Errorf("repeats or results without a URL were kept:\n%s", res.Content)
	}
	res, err = search(t, c, `{"query":"go","count":3}`)
	if err != nil || len(res.Details.(*web.SearchDetails).Results) != 3 {
		t.Errorf("count 3: %v, %+v", err, res.Details)
	}
	if _, err := search(t, c, `{"query":"go","count":50}`); kindOf(err) != tool.InvalidArguments {
		t.Errorf("count over the maximum: %v", err)
	}
	inv, _ := tools.Prepare(webTool(t, c, web.SearchName), `{"query":"go"}`, 0)
	if inv.Activity != "Searching the web for go" {
		t.Errorf("activity %q", inv.Activity)
	}
}

func TestSearXNGFailures(t *testing.T) {
	forbidden := newServer(t, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusForbidden) })
	broken := newServer(t, func(w http.ResponseWriter, _ *http.Request) { ok(w, "text/html", "<html>not json</html>") })
	empty := newServer(t, func(w http.ResponseWriter, _ *http.Request) { ok(w, "application/json", `{"results":[]}`) })
	down := newServer(t, nil)
	down.Close()
	tests := []struct {
		base   string
		errHas string
	}{
		{forbidden.URL, "search.formats must include json"},
		{broken.URL, "not SearXNG JSON"},
		{down.URL, "could not be reached"},
	}
	for _, tt := range tests {
		c := newWeb(t, web.Config{SearchURL: tt.base})
		_, err := search(t, c, `{"query":"x"}`)
		if kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: %v, want a tool_error saying %q", tt.base, err, tt.errHas)
		}
		if err != nil && strings.Contains(err.Error(), tt.base) {
			t.Errorf("the error reveals the provider's address: %v", err)
		}
	}
	c := newWeb(t, web.Config{SearchURL: empty.URL})
	if res, err := search(t, c, `{"query":"nothing"}`); err != nil || res.Content != `No results for "nothing".` {
		t.Errorf("no results: %q, %v", res.Content, err)
	}
}

// providerFunc is a Provider from a function.
type providerFunc func(ctx context.Context, query string, n int) ([]web.Result, error)

func (f providerFunc) Search(ctx context.Context, q string, n int) ([]web.Result, error) {
	return f(ctx, q, n)
}

// Results are capped to the budget, whatever the provider returns.
func TestSearchCapped(t *testing.T) {
	p := providerFunc(func(_ context.Context, q string, n int) ([]web.Result, error) {
		var rs []web.Result
		for i := range n + 5 { // a provider that ignores n
			rs = append(rs, web.Result{Title: strings.Repeat("T", 500), URL: fmt.Sprintf("https://e.com/%d", i), Snippet: strings.Repeat("s", 5000)})
		}
		return rs, nil
	})
	c := newWeb(t, web.Config{Search: p, OutputBudget: web.MinOutputBudget})
	res, err := search(t, c, `{"query":"x","count":20}`)
	if err != nil {
		t.Fatal(err)
	}
	d := res.Details.(*web.SearchDetails)
	if len(res.Content) > web.MinOutputBudget || !d.Truncated || len(d.Results) != 20 || !strings.Contains(res.Content, "more results left out") {
		t.Errorf("%d bytes, details truncated=%v results=%d", len(res.Content), d.Truncated, len(d.Results))
	}
	failing := newWeb(t, web.Config{Search: providerFunc(func(context.Context, string, int) ([]web.Result, error) {
		return nil, errors.New("quota exhausted")
	})})
	if _, err := search(t, failing, `{"query":"x"}`); !strings.Contains(fmt.Sprint(err), "The search failed: quota exhausted") {
		t.Errorf("failing provider: %v", err)
	}
}

// The category exists exactly when web is bound and something is
// configured: web_fetch with Fetch, web_search only with a provider; in
// main turns and task turns alike.
func TestCategory(t *testing.T) {
	s, _ := searxng(t, 1)
	ctx := func(kind string, bindings ...string) tool.Turn {
		tn := tool.Turn{AgentID: "a1", TurnID: "t1", Kind: kind, Bindings: map[string]bool{}}
		for _, b := range bindings {
			tn.Bindings[b] = true
		}
		return tn
	}
	both := newWeb(t, web.Config{Fetch: true, SearchURL: s.URL})
	fetchOnly := newWeb(t, web.Config{Fetch: true})
	searchOnly := newWeb(t, web.Config{SearchURL: s.URL})
	nothing := newWeb(t, web.Config{})
	tests := []struct {
		c    *web.Category
		turn tool.Turn
		want []string
	}{
		{both, ctx(protocol.KindText, "web"), []string{"web_search", "web_fetch"}},
		{both, ctx(protocol.KindWorkflowTask, "web"), []string{"web_search", "web_fetch"}},
		{both, ctx(protocol.KindText, "computer", "brain"), nil},
		{both, ctx(protocol.KindText), nil},
		{fetchOnly, ctx(protocol.KindText, "web"), []string{"web_fetch"}},
		{searchOnly, ctx(protocol.KindText, "web"), []string{"web_search"}},
		{nothing, ctx(protocol.KindText, "web"), nil},
	}
	for i, tt := range tests {
		ts, err := tt.c.Category().Tools(context.Background(), tt.turn)
		var names []string
		for _, tl := range ts {
			names = append(names, tl.Name())
		}
		if err != nil || strings.Join(names, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%d: %v, %v; want %v", i, names, err, tt.want)
		}
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []web.Config{
		{Fetch: true, Allow: []string{"10.0.0.0/40"}},
		{Fetch: true, Allow: []string{"host:99999"}},
		{SearchURL: "searx.local"},
		{SearchURL: "ftp://searx.local"},
		{Fetch: true, OutputBudget: 10},
	} {
		if _, err := web.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted it", cfg)
		}
	}
}
