package computer_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/category/web"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// The catalogs a main assembler of the two categories builds: the
// computer only in main turns that bind it, the web wherever it is bound.
func TestGoldenCatalogs(t *testing.T) {
	needSandbox(t)
	comp := newCategory(t, computer.Config{})
	wc, err := web.New(web.Config{Fetch: true, SearchURL: "http://searxng.internal:8080"})
	if err != nil {
		t.Fatal(err)
	}
	a := turn.NewAssembler(comp.Category(), wc.Category())
	env := func(kind string, bindings ...string) turn.Env {
		c := protocol.Context{Kind: kind, Bindings: map[string]bool{}}
		if kind == protocol.KindWorkflowTask {
			c.WorkflowID, c.TaskID = "wf1", "q1"
		}
		for _, b := range bindings {
			c.Bindings[b] = true
		}
		return turn.Env{AgentID: "a1", TurnID: "t1", Context: c}
	}
	tests := []struct {
		name   string
		env    turn.Env
		want   []string
		golden string
	}{
		{"text turn binding computer and web", env(protocol.KindText, "computer", "web"),
			[]string{"list_files", "read_file", "write_file", "edit_file", "run_command", "web_search", "web_fetch"}, "catalog_text_computer_web.json"},
		{"text turn binding computer", env(protocol.KindText, "computer"),
			[]string{"list_files", "read_file", "write_file", "edit_file", "run_command"}, ""},
		{"text turn binding web", env(protocol.KindText, "web"), []string{"web_search", "web_fetch"}, ""},
		{"text turn binding neither", env(protocol.KindText, "brain", "diagnostics"), nil, "catalog_text_none.json"},
		{"task turn claiming computer and web", env(protocol.KindWorkflowTask, "computer", "web"), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := a.Assemble(context.Background(), tt.env)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range set.Tools() {
				names = append(names, tl.Name())
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("tools %v, want %v", names, tt.want)
			}
			catalog, digest := set.Catalog()
			again, _ := a.Assemble(context.Background(), tt.env)
			if c2, d2 := again.Catalog(); string(c2) != string(catalog) || d2 != digest {
				t.Error("the catalog is not byte-identical for the same context")
			}
			if tt.golden != "" {
				golden(t, tt.golden, catalog)
			}
			if !json.Valid(catalog) {
				t.Errorf("catalog is not JSON: %s", catalog)
			}
		})
	}
}
