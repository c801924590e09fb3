package jobs_test

// The harness drives real workers on an embedded server, as
// internal/worker's tests do (copied: test helpers do not cross packages).

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/protocol"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/worker"
)

func testLogger() *slog.Logger {
	if os.Getenv("WORKER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// setup builds what a worker serves, given its JetStream context: the
// main-turn creators and, optionally, the task turns.
type setup func(js jetstream.JetStream) ([]turn.Creator, worker.TaskTurns)

// runWorker runs a worker on its own connection with what build returns.
// The returned stop ends it and waits; it also runs when the test ends.
func runWorker(t *testing.T, s *natstest.Server, name string, build setup) (stop func()) {
	t.Helper()
	nc := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg := worker.Config{Name: name, Grace: 5 * time.Second, Topology: bus.Topology{AckWait: 2 * time.Second, MaxDeliver: 3}}
	creators, tasks := build(js)
	w, err := worker.New(ctx, nc, cfg, turn.NewAssembler(creators...), tasks, testLogger())
	if err != nil {
		cancel()
		t.Fatalf("worker.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			// A worker stopped while its consumer is still being looked up
			// returns the lookup's context.Canceled (bus.Consumer.Run);
			// that is a stop, not a failure.
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("worker.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop")
		}
	}
	t.Cleanup(stop)
	waitForService(t, nc)
	return stop
}

func waitForService(t *testing.T, nc *nats.Conn) {
	t.Helper()
	req, _ := json.Marshal(protocol.CatalogRequest{AgentID: "probe", TurnID: "probe", Context: protocol.Context{Kind: protocol.KindText}})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := nc.Request(protocol.SubjectTools, req, 200*time.Millisecond); err == nil {
			return
		}
	}
	t.Fatal("worker never answered a catalog request")
}

// gateway plays the gateway: it publishes steps and reads their events.
type gateway struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream
}

func newGateway(t *testing.T, s *natstest.Server) *gateway {
	nc := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &gateway{t: t, nc: nc, js: js}
}

type call struct{ id, name, args string }

func fc(id, name, args string) call { return call{id: id, name: name, args: args} }

// sendStep publishes a step on prefix.<agent>.<turn>.
func (g *gateway) sendStep(prefix, agent, turnID string, n int, c protocol.Context, calls ...call) {
	g.t.Helper()
	out := []any{}
	for _, c := range calls {
		out = append(out, map[string]any{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.args})
	}
	body, _ := json.Marshal(map[string]any{"agent_id": agent, "turn_id": turnID, "step": n, "context": c, "output": out})
	m := nats.NewMsg(protocol.Subject(prefix, agent, turnID))
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID(agent, turnID, int64(n)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.js.PublishMsg(ctx, m); err != nil {
		g.t.Fatalf("publish step: %v", err)
	}
}

// output is a call.output event, as far as the tests read it.
type output struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Status string `json:"status"`
	Error  *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
	Item     protocol.FunctionCallOutput `json:"item"`
	Details  json.RawMessage             `json:"details"`
	Activity string                      `json:"activity"`
	Raw      json.RawMessage             `json:"-"`
}

// run publishes a main-turn step with the given bindings and returns its
// call.output events by call id, once step.done has arrived.
func (g *gateway) run(agent, turnID string, n int, bindings map[string]bool, calls ...call) map[string]output {
	g.t.Helper()
	return g.runStep(protocol.PrefixCall, agent, turnID, n, protocol.Context{Kind: protocol.KindText, Bindings: bindings}, calls...)
}

// runStep is run for any subject prefix and context.
func (g *gateway) runStep(prefix, agent, turnID string, n int, sc protocol.Context, calls ...call) map[string]output {
	g.t.Helper()
	ctx := context.Background()
	c, err := g.js.OrderedConsumer(ctx, protocol.StreamOutputs, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, agent, turnID)},
	})
	if err != nil {
		g.t.Fatal(err)
	}
	g.sendStep(prefix, agent, turnID, n, sc, calls...)
	outs := map[string]output{}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		m, err := c.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			continue
		}
		var head struct {
			Type string `json:"type"`
			Step int    `json:"step"`
		}
		_ = json.Unmarshal(m.Data(), &head)
		if head.Step != n {
			continue
		}
		switch head.Type {
		case protocol.EventCallOutput:
			var o output
			if err := json.Unmarshal(m.Data(), &o); err != nil {
				g.t.Fatalf("call.output %s: %v", m.Data(), err)
			}
			o.Raw = m.Data()
			outs[o.CallID] = o
		case protocol.EventStepDone:
			return outs
		}
	}
	g.t.Fatalf("no step.done for %s.%s step %d within 30s", agent, turnID, n)
	return nil
}

// catalog asks turn.tools for turn a1.t1 and returns the tools and their
// names in order.
func (g *gateway) catalog(c protocol.Context) (json.RawMessage, []string) {
	g.t.Helper()
	return g.catalogFor("a1", "t1", c)
}

// catalogFor is catalog for any turn.
func (g *gateway) catalogFor(agent, turnID string, c protocol.Context) (json.RawMessage, []string) {
	g.t.Helper()
	req, _ := json.Marshal(protocol.CatalogRequest{AgentID: agent, TurnID: turnID, Context: c})
	m, err := g.nc.Request(protocol.SubjectTools, req, 10*time.Second)
	if err != nil {
		g.t.Fatal(err)
	}
	var reply protocol.CatalogReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		g.t.Fatalf("catalog reply %s: %v", m.Data, err)
	}
	var defs []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(reply.Tools, &defs); err != nil {
		g.t.Fatal(err)
	}
	names := []string{}
	for _, d := range defs {
		names = append(names, d.Name)
	}
	return reply.Tools, names
}
