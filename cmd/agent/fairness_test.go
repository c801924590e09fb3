package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// --fairness-key and --fairness-weight reach the catalog request and
// every step of the turn as context.fairness; malformed values stop the
// command before it connects.
func TestFairnessFlags(t *testing.T) {
	const first = "Ping once."
	model := newFakeModel(t, &script{first: first, outputs: [][]string{{call("c1", "ping", `{}`)}, {say("pong it was")}}})
	srv := natstest.Start(t)
	workertest.RunWorker(t, srv, "w1", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{diagnostics.Category(diagnostics.Config{})}, nil
	})
	// Core subscriptions see the catalog request and the step as they
	// are published (the stream keeps the step for the worker).
	spy := srv.Connect(t)
	seen := make(chan *nats.Msg, 10)
	for _, subject := range []string{protocol.SubjectTools, protocol.PrefixCall + ".a1.t1"} {
		sub, err := spy.ChanSubscribe(subject, seen)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_BASE_URL", model.srv.URL+"/v1/")
	t.Setenv("OPENAI_API_KEY", "test-key")
	args := []string{"--nats-url", srv.ClientURL(), "--model", "fake", "--bind", "diagnostics", "--agent", "a1", "--turn", "t1",
		"--fairness-key", "tenant-7", "--fairness-weight", "3", first}
	if err := run(ctxT(t), args, io.Discard, io.Discard); err != nil {
		t.Fatalf("run: %v", err)
	}
	got := map[string]int{}
	for len(got) < 2 || got[protocol.PrefixCall+".a1.t1"] < 2 {
		select {
		case m := <-seen:
			var body struct {
				Context protocol.Context `json:"context"`
			}
			if err := json.Unmarshal(m.Data, &body); err != nil {
				t.Fatalf("%s: %s: %v", m.Subject, m.Data, err)
			}
			if f := body.Context.Fairness; f.Key != "tenant-7" || f.Weight != 3 {
				t.Errorf("%s carried fairness %+v: %s", m.Subject, f, m.Data)
			}
			got[m.Subject]++
		case <-time.After(10 * time.Second):
			t.Fatalf("saw %v, want the catalog request and both steps", got)
		}
	}
	for _, bad := range [][]string{
		{"--fairness-key", "tenant 7", "hi"},
		{"--fairness-key", strings.Repeat("k", 65), "hi"},
		{"--fairness-weight", "0.001", "hi"},
		{"--fairness-weight", "101", "hi"},
		{"--fairness-weight", "-2", "hi"},
	} {
		if _, err := parse(bad, io.Discard); err == nil || !strings.Contains(err.Error(), "fairness") {
			t.Errorf("%q: %v, want a fairness error", bad, err)
		}
	}
}
