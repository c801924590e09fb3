package turn_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

func names(ts []*tool.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = turn.ToolKey(t.Spec().Namespace, t.Name())
	}
	return out
}

// category returns a category that contributes ts when binding is bound
// (always when binding is "").
func category(binding string, ts ...*tool.Tool) tool.Category {
	return tool.Category{Name: "c", Tools: func(_ context.Context, t tool.Turn) ([]*tool.Tool, error) {
		if binding != "" && !t.Bound(binding) {
			return nil, nil
		}
		return ts, nil
	}}
}

func env(bindings ...string) turn.Env {
	b := map[string]bool{}
	for _, n := range bindings {
		b[n] = true
	}
	return turn.Env{AgentID: "a1", TurnID: "t1", Context: protocol.Context{Kind: protocol.KindText, Bindings: b}}
}

func TestAssemble(t *testing.T) {
	tl := func(name string, opts ...func(*tool.Spec)) *tool.Tool {
		return newTool(t, name, "", reply(name), opts...)
	}
	core := category("", tl("ping"), tl("todo"))
	web := category("web", tl("web_search"), tl("web_fetch"))
	brain := category("brain", tl("recall"))
	flaky := tool.Category{Name: "flaky", Tools: func(ctx context.Context, _ tool.Turn) ([]*tool.Tool, error) {
		turn.Note(ctx, "linear: server unreachable")
		return []*tool.Tool{tl("list", inNamespace("github", "GitHub."))}, nil
	}}
	a := turn.NewAssembler(core, web, brain, flaky)

	tests := []struct {
		name     string
		bindings []string
		want     []string
	}{
		{"categories in order", []string{"web", "brain"}, []string{"ping", "todo", "web_search", "web_fetch", "recall", "github.list"}},
		{"unbound category contributes nothing", []string{"brain"}, []string{"ping", "todo", "recall", "github.list"}},
		{"nothing bound", nil, []string{"ping", "todo", "github.list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := a.Assemble(context.Background(), env(tt.bindings...))
			if err != nil {
				t.Fatal(err)
			}
			if got := names(set.Tools()); !slices.Equal(got, tt.want) {
				t.Errorf("tools %v, want %v", got, tt.want)
			}
			if !slices.Equal(set.Notes, []string{"linear: server unreachable"}) {
				t.Errorf("notes %v", set.Notes)
			}
		})
	}

	// The category sees the turn, and the whole context through ctx.
	var seen tool.Turn
	var seenCtx protocol.Context
	spy := tool.Category{Name: "spy", Tools: func(ctx context.Context, t tool.Turn) ([]*tool.Tool, error) {
		seen, seenCtx = t, turn.TurnContext(ctx)
		return nil, nil
	}}
	e := env("web")
	e.Context.Skills = []string{"triage"}
	if _, err := turn.NewAssembler(spy).Assemble(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if seen.AgentID != "a1" || seen.TurnID != "t1" || seen.Kind != protocol.KindText || !seen.Bound("web") || !slices.Equal(seenCtx.Skills, e.Context.Skills) {
		t.Errorf("category saw %+v, %+v", seen, seenCtx)
	}

	// A category's error fails the assembly.
	boom := errors.New("config missing")
	fail := tool.Category{Name: "fail", Tools: func(context.Context, tool.Turn) ([]*tool.Tool, error) { return nil, boom }}
	if _, err := turn.NewAssembler(core, fail).Assemble(context.Background(), env()); !errors.Is(err, boom) {
		t.Errorf("Assemble = %v, want the category's error", err)
	}
}

func TestAssembleDuplicates(t *testing.T) {
	tl := func(name string, opts ...func(*tool.Spec)) *tool.Tool {
		return newTool(t, name, "", reply(name), opts...)
	}
	tests := []struct {
		name    string
		sets    [][]*tool.Tool
		wantErr string
	}{
		{"same name twice", [][]*tool.Tool{{tl("search")}, {tl("search")}}, "duplicate tool search in one turn"},
		{"same name in one category", [][]*tool.Tool{{tl("search"), tl("search")}}, "duplicate tool search in one turn"},
		{"same namespaced name twice", [][]*tool.Tool{{tl("list", inNamespace("github", ""))}, {tl("list", inNamespace("github", ""))}},
			"duplicate tool github.list in one turn"},
		{"same name across namespaces", [][]*tool.Tool{{tl("list", inNamespace("github", ""))}, {tl("list", inNamespace("linear", ""))}, {tl("list")}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs []tool.Category
			for _, ts := range tt.sets {
				cs = append(cs, category("", ts...))
			}
			set, err := turn.NewAssembler(cs...).Assemble(context.Background(), env())
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				for _, ns := range []string{"github", "linear", ""} {
					if got := set.Lookup(ns, "list"); got == nil || got.Spec().Namespace != ns {
						t.Errorf("Lookup(%q, list) = %v", ns, got)
					}
				}
				if set.Lookup("jira", "list") != nil {
					t.Error("Lookup found a tool in a namespace that does not exist")
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("Assemble = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

type issueArgs struct {
	Repo   string `json:"repo" jsonschema:"description=owner/name,pattern=^[^/]+/[^/]+$"`
	State  string `json:"state,omitempty" jsonschema:"enum=open,enum=closed"`
	Number int    `json:"number,omitempty" jsonschema:"minimum=1"`
}

// catalogTools covers every catalog form: plain functions, a strict one, a
// namespace whose tools are not adjacent, deferred plain and namespaced
// tools.
func catalogTools(t testing.TB) []*tool.Tool {
	ok := func(context.Context, issueArgs) (tool.Result, error) { return tool.Result{}, nil }
	def := func(s tool.Spec) *tool.Tool {
		tool, err := tool.New(tool.Def[issueArgs]{Spec: s, Execute: ok})
		if err != nil {
			t.Fatal(err)
		}
		return tool
	}
	return []*tool.Tool{
		def(tool.Spec{Name: "web_search", Description: "Search the web.", ReadOnly: true}),
		def(tool.Spec{Name: "list_issues", Description: "List the issues of a repository.", Namespace: "github", ReadOnly: true}),
		def(tool.Spec{Name: "submit", Description: "Submit the result.", Strict: true}),
		def(tool.Spec{Name: "get_issue", Description: "Get one issue.", Namespace: "github", NamespaceDescription: "GitHub, through its MCP server.", ReadOnly: true}),
		def(tool.Spec{Name: "send_email", Description: "Send an email.", DeferLoading: true}),
		def(tool.Spec{Name: "close_issue", Description: "Close an issue.", Namespace: "github", DeferLoading: true}),
		def(tool.Spec{Name: "create_ticket", Description: "Create a ticket.", Namespace: "linear", NamespaceDescription: "Linear.", DeferLoading: true}),
	}
}

func TestCatalogGolden(t *testing.T) {
	set := mustSet(t, catalogTools(t)...)
	cat, digest := set.Catalog()
	sum := sha256.Sum256(cat)
	if digest != hex.EncodeToString(sum[:]) {
		t.Errorf("digest %s is not the sha256 of the catalog", digest)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, cat, "", "  "); err != nil {
		t.Fatal(err)
	}
	b.WriteByte('\n')
	golden(t, "catalog.json", b.Bytes())
	// The digest pins the exact bytes, which the indented file does not.
	golden(t, "catalog.sha256", []byte(digest+"\n"))

	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(cat, &entries); err != nil {
		t.Fatal(err)
	}
	var shape []string
	for _, e := range entries {
		var typ, name string
		json.Unmarshal(e["type"], &typ)
		json.Unmarshal(e["name"], &name)
		shape = append(shape, typ+":"+name)
	}
	want := []string{"function:web_search", "namespace:github", "function:submit", "function:send_email", "namespace:linear", "tool_search:"}
	if !slices.Equal(shape, want) {
		t.Errorf("catalog entries %v, want %v", shape, want)
	}
	if string(entries[5]["execution"]) != `"client"` {
		t.Errorf("tool_search entry %v is not client-executed", entries[5])
	}
	// The deferred short form: name and description only.
	if got := string(mustMarshal(t, entries[3])); got != `{"defer_loading":true,"description":"Send an email.","name":"send_email","type":"function"}` {
		t.Errorf("deferred entry %s", got)
	}
	if !bytes.Contains(cat, []byte(`{"type":"function","name":"send_email","description":"Send an email.","defer_loading":true}`)) {
		t.Errorf("deferred entry is not in its short form, in order: %s", cat)
	}
	// Namespace entries: tools in order, description from the first tool
	// that has one, deferred members by name alone (the provider shows a
	// deferred namespace by its own name and description).
	var gh struct {
		Description string            `json:"description"`
		Tools       []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(mustMarshal(t, entries[1]), &gh); err != nil {
		t.Fatal(err)
	}
	if gh.Description != "GitHub, through its MCP server." || len(gh.Tools) != 3 {
		t.Errorf("github namespace %+v", gh)
	}
	if got := string(gh.Tools[2]); got != `{"type":"function","name":"close_issue","defer_loading":true}` {
		t.Errorf("deferred namespaced tool %s", got)
	}
	// Non-deferred tools carry their full definition, strict copied.
	set2 := mustSet(t, catalogTools(t)...)
	if !bytes.Contains(cat, set2.Lookup("", "submit").Definition()) || !bytes.Contains(cat, []byte(`"strict":true`)) {
		t.Error("the strict tool's definition is not in the catalog as defined")
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Two assemblies of the same categories for the same context give the same
// bytes and digest (the gateway's prompt cache depends on it).
func TestCatalogIsByteIdentical(t *testing.T) {
	build := func() (json.RawMessage, string) {
		// Fresh tools each time: nothing may depend on pointer identity
		// or map order.
		ts := catalogTools(t)
		a := turn.NewAssembler(category("", ts[:3]...), category("web", ts[3:5]...), category("", ts[5:]...))
		set, err := a.Assemble(context.Background(), env("web"))
		if err != nil {
			t.Fatal(err)
		}
		return set.Catalog()
	}
	first, digest := build()
	for range 20 {
		again, d := build()
		if !bytes.Equal(first, again) || d != digest {
			t.Fatalf("catalogs differ:\n%s\n%s", first, again)
		}
	}
	// A different context gives a different catalog.
	ts := catalogTools(t)
	other, err := turn.NewAssembler(category("", ts[:3]...), category("web", ts[3:5]...)).Assemble(context.Background(), env())
	if err != nil {
		t.Fatal(err)
	}
	if _, d := other.Catalog(); d == digest {
		t.Error("a different tool set has the same digest")
	}
}

func TestCatalogToolSearchOnlyWithDeferredTools(t *testing.T) {
	ts := catalogTools(t)
	cat, _ := mustSet(t, ts[:4]...).Catalog()
	if bytes.Contains(cat, []byte(`"tool_search"`)) || bytes.Contains(cat, []byte("defer_loading")) {
		t.Errorf("a catalog without deferred tools has tool_search: %s", cat)
	}
	cat, _ = mustSet(t, ts[0], ts[4]).Catalog()
	if !bytes.HasSuffix(cat, append([]byte(","), append(turn.ToolSearchEntry, ']')...)) {
		t.Errorf("the catalog does not end with the tool_search entry: %s", cat)
	}
	if cat, _ := mustSet(t).Catalog(); string(cat) != "[]" {
		t.Errorf("empty catalog = %s", cat)
	}
	var ts2 map[string]any
	if err := json.Unmarshal(turn.ToolSearchEntry, &ts2); err != nil || ts2["type"] != "tool_search" {
		t.Errorf("ToolSearchEntry %s: %v", turn.ToolSearchEntry, err)
	}
}

func TestSetDeferred(t *testing.T) {
	set := mustSet(t, catalogTools(t)...)
	if got := names(set.Deferred()); !slices.Equal(got, []string{"send_email", "github.close_issue", "linear.create_ticket"}) {
		t.Errorf("Deferred() = %v", got)
	}
	if !strings.Contains(names(set.Tools())[1], "github.") {
		t.Errorf("Tools() = %v", names(set.Tools()))
	}
}

// A small set searched in order: without any namespaced tool a lookup
// compares names alone, and a namespaced call finds nothing; with one,
// both the name and the namespace must match.
func TestSmallSetLookup(t *testing.T) {
	tl := func(name string, opts ...func(*tool.Spec)) *tool.Tool {
		return newTool(t, name, "", reply(name), opts...)
	}
	plain, err := turn.NewSet(tl("list"), tl("get"))
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.Lookup("", "get"); got == nil || got.Name() != "get" {
		t.Errorf("Lookup(get) = %v", got)
	}
	if plain.Lookup("github", "list") != nil || plain.Lookup("", "put") != nil {
		t.Error("a set without namespaces found a namespaced or unknown call")
	}
	mixed, err := turn.NewSet(tl("list", inNamespace("github", "")), tl("list"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"github", ""} {
		if got := mixed.Lookup(ns, "list"); got == nil || got.Spec().Namespace != ns {
			t.Errorf("Lookup(%q, list) = %v", ns, got)
		}
	}
	if mixed.Lookup("linear", "list") != nil {
		t.Error("found a tool in a namespace that does not exist")
	}
}
