package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// runProgram runs a program with categories against s until the test
// ends, and returns the error Run ended with on errc.
func runProgram(t *testing.T, s *natstest.Server, categories []tool.Category) <-chan error {
	t.Helper()
	m := newProgram(Config{Version: "1.2.3"}, categories...)
	if err := m.ParseFlags([]string{"--nats-url", s.ClientURL(), "--storage", "memory", "--log-level", "error", "--name", "w1"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc, done := make(chan error, 1), make(chan struct{})
	go func() {
		err := m.Run(ctx)
		m.Close()
		errc <- err
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the worker did not stop")
		}
	})
	return errc
}

var shout = tool.Must(tool.Def[struct {
	Text string `json:"text"`
}]{
	Spec: tool.Spec{Name: "shout", Description: "Say it louder.", ReadOnly: true},
	Execute: func(ctx context.Context, p struct {
		Text string `json:"text"`
	}) (tool.Result, error) {
		c, _ := tool.CallFrom(ctx)
		return tool.Result{Content: strings.ToUpper(p.Text) + " " + c.AgentID}, nil
	},
})

// A category of one's own is listed and called like a built-in one, in
// the order given to Main after the built-ins that do not vary by
// turn; one whose Tools function panics or fails fails that request only.
func TestOwnCategories(t *testing.T) {
	s := natstest.Start(t)
	loud := tool.NewCategory("loud", shout)
	perAgent := tool.Category{Name: "per_agent", Tools: func(_ context.Context, tn tool.Turn) ([]*tool.Tool, error) {
		switch tn.AgentID {
		case "panics":
			panic("no tools for you")
		case "fails":
			return nil, errors.New("the directory is down")
		case "nil_tool": // a slice filled by index with one left out
			return []*tool.Tool{shout, nil}, nil
		case "zero_tool":
			return []*tool.Tool{new(tool.Tool)}, nil
		}
		tn.Bindings["mutated"] = true // a copy: no other category sees it
		return nil, nil
	}}
	runProgram(t, s, []tool.Category{perAgent, loud})
	nc := s.Connect(t)
	workertest.WaitForService(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	g := &workertest.Gateway{T: t, NC: nc, JS: js}
	bound := map[string]bool{"loud": true}
	if _, names := g.Catalog(protocol.Context{Kind: protocol.KindText, Bindings: bound}); len(names) < 2 || names[len(names)-1] != "shout" || names[0] != "todo_write" {
		t.Errorf("catalog %v, want the built-in categories' tools, then shout", names)
	}
	outs := g.Run("agent-7", "t1", 1, bound, workertest.FC("c1", "shout", `{"text": "hi"}`))
	if o := outs["c1"]; o.Status != "ok" || o.Item.Output != "HI agent-7" {
		t.Errorf("shout: %s", o.Raw)
	}
	for _, agent := range []string{"panics", "fails", "nil_tool", "zero_tool"} {
		req, _ := json.Marshal(protocol.CatalogRequest{AgentID: agent, TurnID: "t1", Context: protocol.Context{Kind: protocol.KindText}})
		m, err := nc.Request(protocol.SubjectTools, req, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("Nats-Service-Error") == "" {
			t.Errorf("%s: catalog %s, want an error", agent, m.Data)
		}
	}
	// The worker goes on.
	if outs := g.Run("agent-8", "t1", 1, bound, workertest.FC("c1", "shout", `{"text": "again"}`)); outs["c1"].Item.Output != "AGAIN agent-8" {
		t.Errorf("after the failures: %s", outs["c1"].Raw)
	}
}

// Categories that cannot be told apart, or are not complete, stop the
// start with an error naming them.
func TestCategoriesRefused(t *testing.T) {
	s := natstest.Start(t)
	for _, c := range []struct {
		cats []tool.Category
		want string
	}{
		{[]tool.Category{tool.NewCategory("loud", shout), tool.NewCategory("loud", shout)}, `two categories are named "loud"`},
		{[]tool.Category{tool.NewCategory("todo", shout)}, `two categories are named "todo"`},
		{[]tool.Category{{Name: "empty"}}, "category \"empty\": Tools is nil"},
		{[]tool.Category{tool.NewCategory("Bad Name", shout)}, "the name must match"},
		{[]tool.Category{{}}, "the name must match"},
	} {
		select {
		case err := <-runProgram(t, s, c.cats):
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no error for %q", c.want)
		}
	}
}

func TestVersion(t *testing.T) {
	for v, want := range map[string]string{"": DefaultVersion, "1.2.3": "1.2.3", "v1.2.3-rc.1+abc": "1.2.3-rc.1+abc", "banana": "", "1.2": "", "v": ""} {
		m := newProgram(Config{Version: v})
		err := m.ParseFlags([]string{"--nats-url", "nats://127.0.0.1:1"})
		switch {
		case want == "" && (err == nil || !strings.Contains(err.Error(), "is not SemVer")):
			t.Errorf("%q: %v", v, err)
		case want != "" && (err != nil || m.version != want || m.Worker.Version != want):
			t.Errorf("%q: %v, %q", v, err, m.version)
		}
	}
}
