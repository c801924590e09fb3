package brain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"
	"github.com/agentbull/toolruntime/tool"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/brain"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
)

// golden compares v, as indented JSON, with testdata/name.
var golden = goldenfile.JSON

func newBrain(t *testing.T, js jetstream.JetStream) *brain.Brain {
	t.Helper()
	b, err := brain.New(context.Background(), js, brain.Config{Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func category(t *testing.T) setup {
	return func(js jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{newBrain(t, js).Category()}, nil
	}
}

var bound = map[string]bool{brain.Binding: true}

func args(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestTwoWorkersShareThePages writes pages in step 0 on worker A, stops A,
// and finds and reads them in later steps on worker B.
func TestTwoWorkersShareThePages(t *testing.T) {
	s := natstest.Start(t)
	g := newGateway(t, s)
	stopA := runWorker(t, s, "A", category(t))
	outs := g.Run("a1", "t1", 0, bound,
		fc("w1", brain.WritePageName, args(map[string]string{"page": "Release process", "content": "How we ship a release: tag the commit, build the artifacts,\nwrite the release notes from merged pull requests,\nthen publish to the registry.\n"})),
		fc("w2", brain.WritePageName, args(map[string]string{"page": "Coffee machine", "content": "The coffee machine on floor 3 needs descaling every month."})),
		fc("w3", brain.WritePageName, args(map[string]string{"page": "Deploy checklist", "content": "Before a deploy: run the migrations.\nRollback: run the deploy tool with --previous."})),
		fc("w4", brain.WritePageName, args(map[string]string{"page": "Release notes style", "content": "Release notes are written in the past tense."})),
	)
	for _, id := range []string{"w1", "w2", "w3", "w4"} {
		if o := outs[id]; o.Status != "ok" || !strings.HasPrefix(o.Item.Output, "Created page") {
			t.Fatalf("%s: %s", id, o.Raw)
		}
	}
	stopA()

	runWorker(t, s, "B", category(t))
	outs = g.Run("a1", "t1", 1, bound,
		fc("r1", brain.RecallName, `{"query":"how do we publish a release","limit":2}`),
		fc("g1", brain.GetPageName, `{"page":"release PROCESS","offset":2,"limit":1}`),
		fc("l1", brain.ListPagesName, `{}`),
	)
	recall := outs["r1"].Item.Output
	if !strings.HasPrefix(recall, "2 pages match") || !strings.Contains(recall, "1. \"Release process\"") ||
		!strings.Contains(recall, "line 3: then publish to the registry.") || strings.Contains(recall, "Coffee") {
		t.Errorf("recall:\n%s", recall)
	}
	if got := outs["g1"].Item.Output; !strings.Contains(got, `Page "Release process" (3 lines`) ||
		!strings.HasSuffix(got, "lines 2-2:\nwrite the release notes from merged pull requests,\n[Lines 3-3 follow: get_page with offset 3.]") {
		t.Errorf("get_page:\n%s", got)
	}
	if got := outs["l1"].Item.Output; !strings.HasPrefix(got, "4 of 4 pages:\n- \"Coffee machine\"") {
		t.Errorf("list_pages:\n%s", got)
	}

	// Append, delete, and search again: the worker's index follows.
	outs = g.Run("a1", "t1", 2, bound,
		fc("a1", brain.WritePageName, `{"page":"Coffee machine","content":"Use the blue descaler.","mode":"append"}`),
		fc("d1", brain.DeletePageName, `{"page":"Deploy checklist"}`),
		fc("r2", brain.RecallName, `{"query":"rollback migrations"}`),
		fc("r3", brain.RecallName, `{"query":"blue descaler"}`),
		fc("d2", brain.DeletePageName, `{"page":"deploy checklist"}`),
		fc("g2", brain.GetPageName, `{"page":"Release"}`),
	)
	if got := outs["a1"].Item.Output; got != `Appended to page "Coffee machine" (2 lines, 81 bytes).` {
		t.Errorf("append: %s", got)
	}
	if got := outs["r2"].Item.Output; !strings.HasPrefix(got, "No page matches") {
		t.Errorf("recall after delete: %s", got)
	}
	if got := outs["r3"].Item.Output; !strings.Contains(got, "line 2: Use the blue descaler.") {
		t.Errorf("recall after append: %s", got)
	}
	if o := outs["d2"]; o.Error == nil || o.Error.Kind != "tool_error" || !strings.Contains(o.Item.Output, "no page titled") {
		t.Errorf("delete of a missing page: %s", o.Raw)
	}
	if o := outs["g2"]; o.Error == nil || o.Error.Message != `There is no page titled "Release". Similar titles: "Release notes style", "Release process".` {
		t.Errorf("get_page of a missing page: %s", o.Raw)
	}
	// Another agent sees none of it.
	outs = g.Run("a2", "t9", 0, bound, fc("r4", brain.RecallName, `{"query":"release"}`))
	if got := outs["r4"].Item.Output; !strings.HasPrefix(got, "No page matches") {
		t.Errorf("another agent's recall: %s", got)
	}
}

// TestLongPages reads a long page in ranges.
func TestLongPages(t *testing.T) {
	s := natstest.Start(t)
	g := newGateway(t, s)
	runWorker(t, s, "A", category(t))
	var body strings.Builder
	for i := 1; i <= 500; i++ {
		fmt.Fprintf(&body, "line %d of the long page\n", i)
	}
	wide := strings.Repeat(strings.Repeat("w", 999)+"\n", 40)
	outs := g.Run("a1", "t1", 0, bound,
		fc("w1", brain.WritePageName, args(map[string]string{"page": "Long", "content": body.String()})),
		fc("w2", brain.WritePageName, args(map[string]string{"page": "Wide", "content": wide})),
		fc("w3", brain.WritePageName, args(map[string]string{"page": "Huge", "content": strings.Repeat("x", 70_000)})),
		fc("g1", brain.GetPageName, `{"page":"Long"}`),
		fc("g2", brain.GetPageName, `{"page":"Long","offset":450,"limit":100}`),
		fc("g3", brain.GetPageName, `{"page":"Long","offset":501}`),
		fc("g4", brain.GetPageName, `{"page":"Wide"}`),
	)
	if o := outs["w3"]; o.Error == nil || o.Error.Kind != "invalid_arguments" || !strings.Contains(o.Item.Output, "over the 65536 byte limit") {
		t.Errorf("huge page: %s", o.Raw)
	}
	g1 := outs["g1"].Item.Output
	if !strings.HasPrefix(g1, `Page "Long" (500 lines`) || !strings.Contains(g1, "lines 1-200:\nline 1 of the long page\n") ||
		!strings.HasSuffix(g1, "line 200 of the long page\n[Lines 201-500 follow: get_page with offset 201.]") {
		t.Errorf("first range:\n%.300s … %s", g1, g1[max(0, len(g1)-200):])
	}
	if g2 := outs["g2"].Item.Output; !strings.Contains(g2, "lines 450-500:\nline 450 of") || !strings.HasSuffix(g2, "line 500 of the long page") {
		t.Errorf("last range: %s", g2[max(0, len(g2)-200):])
	}
	if o := outs["g3"]; o.Error == nil || o.Error.Kind != "invalid_arguments" || !strings.Contains(o.Item.Output, "use an offset from 1 to 500") {
		t.Errorf("offset past the end: %s", o.Raw)
	}
	// 40 lines of 999 bytes exceed one answer's 32 KiB: cut at a line.
	if g4 := outs["g4"].Item.Output; !strings.Contains(g4, "lines 1-32:") || !strings.HasSuffix(g4, "[Lines 33-40 follow: get_page with offset 33.]") {
		t.Errorf("wide page: %.100s … %s", g4, g4[max(0, len(g4)-100):])
	}
}

// tool finds a tool by name in what a category gives for env.
func findTool(t *testing.T, c tool.Category, env turn.Env, name string) *tool.Tool {
	t.Helper()
	set, err := turn.NewAssembler(c).Assemble(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range set.Tools() {
		if tl.Name() == name {
			return tl
		}
	}
	t.Fatalf("no tool %s for %+v", name, env.Context)
	return nil
}

// invoke runs a tool as the dispatcher would, as a call of agent a1.
func invoke(t *testing.T, tl *tool.Tool, arguments string) (tool.Result, error) {
	t.Helper()
	inv, err := tools.Prepare(tl, arguments, 0)
	if err != nil {
		t.Fatalf("%s %s: %v", tl.Name(), arguments, err)
	}
	return inv.Run(tools.WithCall(context.Background(), tool.Call{AgentID: "a1", TurnID: "t1", CallID: "c"}))
}

var mainEnv = turn.Env{AgentID: "a1", TurnID: "t1", Context: protocol.Context{Kind: protocol.KindText, Bindings: bound}}

// TestIndexFollowsOtherWorkers: worker Y's in-memory index catches up with
// what worker X writes and deletes, before every search.
func TestIndexFollowsOtherWorkers(t *testing.T) {
	s := natstest.Start(t)
	x, y := newBrain(t, s.JetStream(t)), newBrain(t, s.JetStream(t))
	write := findTool(t, x.Category(), mainEnv, brain.WritePageName)
	del := findTool(t, x.Category(), mainEnv, brain.DeletePageName)
	titles := func(q string) string {
		hits, err := y.Search(context.Background(), "a1", q, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range hits {
			out = append(out, h.Title)
		}
		return strings.Join(out, ",")
	}
	if got := titles("alpha"); got != "" {
		t.Fatalf("empty brain found %s", got)
	}
	must(invoke(t, write, `{"page":"A","content":"alpha beta"}`))
	must(invoke(t, write, `{"page":"B","content":"beta gamma"}`))
	if got := titles("alpha beta"); got != "A,B" {
		t.Errorf("after two writes: %q", got)
	}
	must(invoke(t, del, `{"page":"A"}`))
	must(invoke(t, write, `{"page":"B","content":"delta"}`))
	must(invoke(t, write, `{"page":"C","content":"alpha"}`))
	if got := titles("alpha beta delta"); got != "B,C" && got != "C,B" {
		t.Errorf("after delete and rewrite: %q", got)
	}
	if got := titles("beta"); got != "" {
		t.Errorf("rewritten page still found by its old words: %q", got)
	}
}

func must(_ tool.Result, err error) {
	if err != nil {
		panic(err)
	}
}

// TestCatalog pins when the brain tools are present: main turns that bind
// brain get all five; task turns get recall and get_page through the
// workflow service's fixed catalog, and can run them.
func TestCatalog(t *testing.T) {
	s := natstest.Start(t)
	g := newGateway(t, s)
	var b *brain.Brain
	var wf *workflowtask.Service
	runWorker(t, s, "A", func(js jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		b = newBrain(t, js)
		wf = workflowtask.New(js, workflowtask.Config{Brain: b.Category(), Logger: testLogger()})
		return []tool.Category{b.Category()}, wf
	})
	// A workflow with one task, started as start_workflow would be.
	start := findTool(t, wf.Category(), mainEnv, workflowtask.StartWorkflowName)
	res, err := invoke(t, start, `{"tasks":[{"id":"q1","instructions":"Answer.","result_schema":{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	var started struct {
		WorkflowID string `json:"workflow_id"`
		Tasks      []struct {
			TurnID string `json:"turn_id"`
		} `json:"tasks"`
	}
	raw, _ := json.Marshal(res.Details)
	if err := json.Unmarshal(raw, &started); err != nil || len(started.Tasks) != 1 {
		t.Fatalf("start_workflow details %s: %v", raw, err)
	}
	taskTurn := started.Tasks[0].TurnID
	all := map[string]bool{"brain": true, "web": true, "todo": true, "schedules": true, "background_jobs": true}
	taskCtx := func(bindings map[string]bool) protocol.Context {
		return protocol.Context{Kind: protocol.KindWorkflowTask, Bindings: bindings, WorkflowID: started.WorkflowID, TaskID: "q1"}
	}

	type row struct {
		Case  string   `json:"case"`
		Tools []string `json:"tools"`
	}
	var rows []row
	var defs json.RawMessage
	for _, c := range []struct {
		name string
		ctx  protocol.Context
	}{
		{"main turn, no bindings", protocol.Context{Kind: protocol.KindText}},
		{"main turn, brain bound", protocol.Context{Kind: protocol.KindText, Bindings: bound}},
		{"main turn, brain false", protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{"brain": false, "web": true}}},
	} {
		ts, names := g.Catalog(c.ctx)
		if len(names) == 5 {
			defs = ts
		}
		rows = append(rows, row{Case: c.name, Tools: names})
	}
	for _, c := range []struct {
		name     string
		bindings map[string]bool
	}{
		{"task turn (workflow service), everything bound", all},
		{"task turn (workflow service), brain not bound", map[string]bool{"web": true}},
	} {
		_, names := g.CatalogFor("a1", taskTurn, taskCtx(c.bindings))
		rows = append(rows, row{Case: c.name, Tools: names})
	}
	golden(t, "catalog.json", map[string]any{"cases": rows, "definitions": defs})

	// The task turn runs recall against the agent's pages; write_page is
	// not its to call.
	must(invoke(t, findTool(t, b.Category(), mainEnv, brain.WritePageName), `{"page":"Answer","content":"The answer is 42."}`))
	outs := g.RunStep(protocol.PrefixTask, "a1", taskTurn, 0, taskCtx(all),
		fc("r1", brain.RecallName, `{"query":"answer"}`),
		fc("w1", brain.WritePageName, `{"page":"x","content":"y"}`),
	)
	if o := outs["r1"]; o.Status != "ok" || !strings.Contains(o.Item.Output, "line 1: The answer is 42.") {
		t.Errorf("recall in a task turn: %s", o.Raw)
	}
	if o := outs["w1"]; o.Error == nil || o.Error.Kind != "unknown_tool" {
		t.Errorf("write_page in a task turn: %s", o.Raw)
	}
}
