package todo_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/todo"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// golden compares v, as indented JSON, with testdata/name.
var golden = goldenfile.JSON

func category(t *testing.T) setup {
	return func(js jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		c, err := todo.New(context.Background(), js, todo.Config{Storage: jetstream.MemoryStorage})
		if err != nil {
			t.Fatal(err)
		}
		return []tool.Category{c.Category()}, nil
	}
}

// TestTwoWorkersShareTheList writes the list in step 0 on worker A, stops
// A, and reads it in step 1 on worker B: the list lives in TODOS, not in
// a worker.
func TestTwoWorkersShareTheList(t *testing.T) {
	s := natstest.Start(t)
	g := newGateway(t, s)
	stopA := runWorker(t, s, "A", category(t))
	outs := g.Run("a1", "t1", 0, nil, fc("c1", todo.WriteName,
		`{"items":[{"content":"Find the release","status":"completed"},{"content":"Draft the notes","status":"in_progress"},{"content":"Publish","status":"pending"}]}`))
	o := outs["c1"]
	if o.Status != "ok" || !strings.Contains(o.Item.Output, "1/3 done") {
		t.Fatalf("todo_write: %s", o.Raw)
	}
	if o.Activity != "Todo: 1/3 done · Draft the notes" {
		t.Errorf("activity %q", o.Activity)
	}
	stopA()

	runWorker(t, s, "B", category(t))
	outs = g.Run("a1", "t1", 1, nil, fc("c2", todo.ReadName, `{}`))
	want := "Todo list (1/3 done · Draft the notes):\n1. [x] Find the release\n2. [>] Draft the notes\n3. [ ] Publish"
	if got := outs["c2"].Item.Output; got != want {
		t.Errorf("todo_read on worker B:\n%s\nwant:\n%s", got, want)
	}
	// Another turn of the same agent has its own list.
	outs = g.Run("a1", "t2", 0, nil, fc("c3", todo.ReadName, `{}`))
	if got := outs["c3"].Item.Output; !strings.Contains(got, "empty") {
		t.Errorf("another turn's list: %s", got)
	}
	// Writing replaces; an empty list clears.
	outs = g.Run("a1", "t1", 2, nil, fc("c4", todo.WriteName, `{"items":[]}`), fc("c5", todo.ReadName, `{}`))
	if got := outs["c5"].Item.Output; got != "The todo list is empty." {
		t.Errorf("after clearing: %q", got)
	}
}

func TestWriteRejects(t *testing.T) {
	s := natstest.Start(t)
	g := newGateway(t, s)
	runWorker(t, s, "A", category(t))
	outs := g.Run("a1", "t1", 0, nil,
		fc("c1", todo.WriteName, `{"items":[{"content":"   ","status":"pending"}]}`),
		fc("c2", todo.WriteName, `{"items":[{"content":"x","status":"done"}]}`),
		fc("c3", todo.WriteName, `{"items":[`+strings.Repeat(`{"content":"x","status":"pending"},`, 100)+`{"content":"x","status":"pending"}]}`),
	)
	for id, want := range map[string]string{"c1": "/items/0/content: empty", "c2": "/items/0/status", "c3": "at most 100 items"} {
		o := outs[id]
		if o.Error == nil || o.Error.Kind != "invalid_arguments" || !strings.Contains(o.Item.Output, want) {
			t.Errorf("%s: %s (want invalid_arguments mentioning %q)", id, o.Raw, want)
		}
	}
}

// TestCatalog pins when the category is present: every main turn unless
// the context binds todo to false.
func TestCatalog(t *testing.T) {
	s := natstest.Start(t)
	g := newGateway(t, s)
	runWorker(t, s, "A", category(t))
	type row struct {
		Case    string           `json:"case"`
		Context protocol.Context `json:"context"`
		Tools   []string         `json:"tools"`
	}
	var rows []row
	var defs json.RawMessage
	for _, c := range []struct {
		name string
		ctx  protocol.Context
	}{
		{"main turn, no bindings", protocol.Context{Kind: protocol.KindText}},
		{"main turn, todo bound", protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{"todo": true}}},
		{"main turn, other bindings", protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{"web": true}}},
		{"main turn, todo false", protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{"todo": false, "web": true}}},
	} {
		tools, names := g.Catalog(c.ctx)
		if defs == nil {
			defs = tools
		}
		rows = append(rows, row{Case: c.name, Context: c.ctx, Tools: names})
	}
	golden(t, "catalog.json", map[string]any{"cases": rows, "definitions": defs})
}

func ExampleSummary() {
	items := []todo.Item{{Content: "Plan", Status: todo.Completed}, {Content: "Build", Status: todo.InProgress}, {Content: "Ship", Status: todo.Pending}}
	os.Stdout.WriteString(todo.Summary(items) + "\n" + todo.Render(items) + "\n")
	// Output:
	// 1/3 done · Build
	// Todo list (1/3 done · Build):
	// 1. [x] Plan
	// 2. [>] Build
	// 3. [ ] Ship
}
