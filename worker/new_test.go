package worker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// A worker made by New serves its categories only, on the caller's
// connection; the end of Run's context lets a running call finish within
// the grace, and Run returns nil after it.
func TestNewRunDrains(t *testing.T) {
	s := natstest.Start(t)
	started, release := make(chan struct{}), make(chan struct{})
	slow := tool.Must(tool.Def[struct{}]{
		Spec: tool.Spec{Name: "slow", Description: "Wait to be released."},
		Execute: func(context.Context, struct{}) (tool.Result, error) {
			close(started)
			<-release
			return tool.Result{Content: "released"}, nil
		},
	})
	w, err := New(s.Connect(t), Config{Name: "lib-1", Version: "v1.2.3", MemoryStorage: true, Logger: workertest.Logger()},
		tool.NewCategory("loud", shout), tool.NewCategory("slow", slow))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	nc := s.Connect(t)
	workertest.WaitForService(t, nc)
	g := workertest.NewGateway(t, s)
	if _, names := g.Catalog(protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{"loud": true, "slow": true, "web": true}}); strings.Join(names, ",") != "shout,slow" {
		t.Errorf("catalog %v, want shout,slow and no built-in", names)
	}
	if outs := g.Run("a1", "t1", 1, map[string]bool{"loud": true}, workertest.FC("c1", "shout", `{"text": "hi"}`)); outs["c1"].Item.Output != "HI a1" {
		t.Errorf("shout: %s", outs["c1"].Raw)
	}
	req, _ := json.Marshal(protocol.CatalogRequest{AgentID: "a1", TurnID: "t2", Context: protocol.Context{Kind: protocol.KindWorkflowTask, WorkflowID: "w", TaskID: "x"}})
	if m, err := nc.Request(protocol.SubjectTools, req, 10*time.Second); err != nil || m.Header.Get("Nats-Service-Error") == "" {
		t.Errorf("a task turn's catalog: %v, want an error (New serves no task turns)", err)
	}
	outc := make(chan map[string]workertest.Output, 1)
	go func() { outc <- g.Run("a1", "t3", 1, map[string]bool{"slow": true}, workertest.FC("c1", "slow", `{}`)) }()
	<-started
	cancel()
	select {
	case err := <-ran:
		t.Fatalf("Run returned %v with a call running, before its grace", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-ran; err != nil {
		t.Errorf("Run: %v, want nil after a stop", err)
	}
	if o := (<-outc)["c1"]; o.Status != "ok" || o.Item.Output != "released" {
		t.Errorf("the call running at the stop: %s", o.Raw)
	}
}

// New refuses what Main refuses, with the same words.
func TestNewRefuses(t *testing.T) {
	s := natstest.Start(t)
	nc := s.Connect(t)
	for _, c := range []struct {
		cfg  Config
		cats []tool.Category
		want string
	}{
		{Config{}, []tool.Category{tool.NewCategory("loud", shout), tool.NewCategory("loud", shout)}, `two categories are named "loud"`},
		{Config{}, []tool.Category{{Name: "empty"}}, "Tools is nil"},
		{Config{Version: "banana"}, nil, `version "banana" is not SemVer`},
		{Config{Grace: -time.Second}, nil, "must not be negative"},
	} {
		if w, err := New(nc, c.cfg, c.cats...); err == nil || w != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// Workers made by New beside each other form a fleet: with one of them
// stopped, the other answers every step.
func TestNewFleet(t *testing.T) {
	s := natstest.Start(t)
	stop := map[string]context.CancelFunc{}
	ran := make(chan error, 2)
	for _, name := range []string{"lib-a", "lib-b"} {
		w, err := New(s.Connect(t), Config{Name: name, MemoryStorage: true, Logger: workertest.Logger()}, tool.NewCategory("loud", shout))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stop[name] = cancel
		go func() { ran <- w.Run(ctx) }()
	}
	workertest.WaitForService(t, s.Connect(t))
	g := workertest.NewGateway(t, s)
	bound := map[string]bool{"loud": true}
	for i := range 6 {
		if i == 3 {
			stop["lib-a"]()
			if err := <-ran; err != nil {
				t.Fatalf("the first worker's Run: %v", err)
			}
		}
		agent := "agent-" + string(rune('a'+i))
		if o := g.Run(agent, "t1", 1, bound, workertest.FC("c1", "shout", `{"text": "x"}`))["c1"]; o.Item.Output != "X "+agent {
			t.Errorf("step %d: %s", i, o.Raw)
		}
	}
}
