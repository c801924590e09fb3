package web_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"testing"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"
	"github.com/agentbull/toolruntime/tool"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/web"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
)

// golden compares got with testdata/name (see internal/golden).
var golden = goldenfile.IndentedJSON

// catalogNames lists the names in a catalog, namespaces as ns.name.
func catalogNames(t *testing.T, catalog json.RawMessage) []string {
	t.Helper()
	var entries []struct {
		Type  string `json:"type"`
		Name  string `json:"name"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(catalog, &entries); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Type == "namespace" {
			for _, tl := range e.Tools {
				names = append(names, e.Name+"."+tl.Name)
			}
			continue
		}
		names = append(names, e.Name)
	}
	return names
}

// A workflow task turn that binds web gets the web tools from the
// category, beside submit_result, and nothing of the computer
// even when its context claims it.
func TestTaskTurnCatalog(t *testing.T) {
	ctx := context.Background()
	js := natstest.Start(t).JetStream(t)
	if err := bus.Setup(ctx, js, bus.Topology{}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	w := newWeb(t, web.Config{Fetch: true, SearchURL: "http://searxng.internal:8080"})
	svc := workflowtask.New(js, workflowtask.Config{Web: w.Category(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	// Start a workflow the way a main turn does, through start_workflow.
	main, err := turn.NewAssembler(svc.Category()).Assemble(ctx, turn.Env{AgentID: "a1", TurnID: "main1", Context: protocol.Context{Kind: protocol.KindText}})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := tools.Prepare(main.Lookup("", workflowtask.StartWorkflowName), `{"title":"research","tasks":[{"id":"q1","instructions":"Find the answer on the web.","result_schema":{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}}]}`, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := inv.Run(tools.WithCall(ctx, tool.Call{AgentID: "a1", TurnID: "main1", CallID: "c1"}))
	if err != nil {
		t.Fatalf("start_workflow: %v", err)
	}
	var started struct {
		WorkflowID string `json:"workflow_id"`
		Tasks      []struct {
			TurnID string `json:"turn_id"`
		} `json:"tasks"`
	}
	b, _ := json.Marshal(res.Details)
	if err := json.Unmarshal(b, &started); err != nil || len(started.Tasks) != 1 {
		t.Fatalf("start_workflow details %s: %v", b, err)
	}

	tests := []struct {
		bindings []string
		want     []string
		golden   string
	}{
		{[]string{"web", "computer", "brain", "diagnostics"}, []string{"web_search", "web_fetch", "submit_result"}, "task_catalog_web.json"},
		{[]string{"computer"}, []string{"submit_result"}, ""},
	}
	for _, tt := range tests {
		c := protocol.Context{Kind: protocol.KindWorkflowTask, WorkflowID: started.WorkflowID, TaskID: "q1", Bindings: map[string]bool{}}
		for _, b := range tt.bindings {
			c.Bindings[b] = true
		}
		reply, err := svc.Catalog(ctx, protocol.CatalogRequest{AgentID: "a1", TurnID: started.Tasks[0].TurnID, Context: c})
		if err != nil {
			t.Fatalf("%v: %v", tt.bindings, err)
		}
		if got := catalogNames(t, reply.Tools); !slices.Equal(got, tt.want) {
			t.Errorf("%v: catalog %v, want %v", tt.bindings, got, tt.want)
		}
		if tt.golden != "" {
			golden(t, tt.golden, reply.Tools)
		}
	}
}
