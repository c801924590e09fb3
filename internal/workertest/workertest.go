// Package workertest provides real workers and a gateway for the tests
// of tool categories: a worker on its own connection to an embedded
// server, serving what a test builds, and a gateway that publishes steps,
// waits for their events and asks for catalogs over NATS.
package workertest

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
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// BuildFlags are the go command's flags that build a program the way
// this test binary was built: -race under the race detector. A test that
// builds the worker with them finds in the build cache what ./... compiled
// for its own tests; without, on a fresh machine, each such build compiles
// the whole module graph once more, for minutes of the suite.
// The program then runs under the race detector too.
func BuildFlags() []string {
	if raceBuild {
		return []string{"-race"}
	}
	return nil
}

// Logger discards logs unless WORKER_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("WORKER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Setup builds what a worker serves, given its JetStream context: the
// main-turn categories and, optionally, the task turns.
type Setup func(js jetstream.JetStream) ([]tool.Category, engine.TaskTurns)

// RunWorker runs a worker on its own connection with what build returns.
// The returned stop ends it and waits; it also runs when the test ends.
func RunWorker(t testing.TB, s *natstest.Server, name string, build Setup) (stop func()) {
	t.Helper()
	return RunWorkerWith(t, s, Config(name), build)
}

// Config is the configuration RunWorker gives its worker: short leases
// and few deliveries, so that tests of redelivery end soon.
func Config(name string) engine.Config {
	return engine.Config{Name: name, Grace: 5 * time.Second, Topology: bus.Topology{AckWait: 2 * time.Second, MaxDeliver: 3}}
}

// RunWorkerWith is RunWorker with a configuration of the test's own
// (Config and a field changed, such as an approval policy).
func RunWorkerWith(t testing.TB, s *natstest.Server, cfg engine.Config, build Setup) (stop func()) {
	t.Helper()
	nc := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	categories, tasks := build(js)
	w, err := engine.New(ctx, nc, cfg, turn.NewAssembler(categories...), tasks, Logger())
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
	WaitForService(t, nc)
	return stop
}

func WaitForService(t testing.TB, nc *nats.Conn) {
	t.Helper()
	req, _ := json.Marshal(protocol.CatalogRequest{AgentID: "probe", TurnID: "probe", Context: protocol.Context{Kind: protocol.KindText}})
	// Generous: a catalog of huge definitions takes long to build under
	// -race on a loaded machine; only a worker that never answers fails.
	deadline := time.Now().Add(60 * time.Second)
	// Each unanswered request waits twice as long as the one before: a
	// worker that takes longer than a fixed wait to build each answer
	// would otherwise never be heard, and build one for every request.
	wait := 2 * time.Second
	for time.Now().Before(deadline) {
		_, err := nc.Request(protocol.SubjectTools, req, min(wait, time.Until(deadline)))
		if err == nil {
			return
		}
		if errors.Is(err, nats.ErrTimeout) {
			wait *= 2
		}
		// No responders comes back at once: without a pause this loop
		// spins a core (beside the worker it waits for) until the service
		// is up.
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("worker never answered a catalog request")
}

// gateway plays the gateway: it publishes steps and reads their events.
type Gateway struct {
	T  testing.TB
	NC *nats.Conn
	JS jetstream.JetStream
}

func NewGateway(t testing.TB, s *natstest.Server) *Gateway {
	nc := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &Gateway{T: t, NC: nc, JS: js}
}

type Call struct{ ID, Name, Args, Namespace string }

func FC(id, name, args string) Call { return Call{ID: id, Name: name, Args: args} }

// NsFC is a function call of a tool in a namespace (an MCP server's).
func NsFC(ns, id, name, args string) Call { return Call{ID: id, Name: name, Args: args, Namespace: ns} }

// SendStep publishes a step on prefix.<agent>.<turn>.
func (g *Gateway) SendStep(prefix, agent, turnID string, n int64, c protocol.Context, calls ...Call) {
	g.T.Helper()
	out := []any{}
	for _, c := range calls {
		fc := map[string]any{"type": "function_call", "call_id": c.ID, "name": c.Name, "arguments": c.Args}
		if c.Namespace != "" {
			fc["namespace"] = c.Namespace
		}
		out = append(out, fc)
	}
	body, _ := json.Marshal(map[string]any{"agent_id": agent, "turn_id": turnID, "step": n, "context": c, "output": out})
	m := nats.NewMsg(protocol.Subject(prefix, agent, turnID))
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID(agent, turnID, int64(n)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.JS.PublishMsg(ctx, m); err != nil {
		g.T.Fatalf("publish step: %v", err)
	}
}

// Output is a call.output event, as far as the tests read it.
type Output struct {
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

// Run publishes a main-turn step with the given bindings and returns its
// call.output events by call id, once step.done has arrived.
func (g *Gateway) Run(agent, turnID string, n int64, bindings map[string]bool, calls ...Call) map[string]Output {
	g.T.Helper()
	return g.RunStep(protocol.PrefixCall, agent, turnID, n, protocol.Context{Kind: protocol.KindText, Bindings: bindings}, calls...)
}

// RunStep is Run for any subject prefix and context.
func (g *Gateway) RunStep(prefix, agent, turnID string, n int64, sc protocol.Context, calls ...Call) map[string]Output {
	g.T.Helper()
	ctx := context.Background()
	c, err := g.JS.OrderedConsumer(ctx, protocol.StreamOutputs, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, agent, turnID)},
	})
	if err != nil {
		g.T.Fatal(err)
	}
	g.SendStep(prefix, agent, turnID, n, sc, calls...)
	outs := map[string]Output{}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		m, err := c.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			continue
		}
		var head struct {
			Type string `json:"type"`
			Step int64  `json:"step"`
		}
		_ = json.Unmarshal(m.Data(), &head)
		if head.Step != n {
			continue
		}
		switch head.Type {
		case protocol.EventCallOutput:
			var o Output
			if err := json.Unmarshal(m.Data(), &o); err != nil {
				g.T.Fatalf("call.output %s: %v", m.Data(), err)
			}
			o.Raw = m.Data()
			outs[o.CallID] = o
		case protocol.EventStepDone:
			return outs
		}
	}
	g.T.Fatalf("no step.done for %s.%s step %d within 30s", agent, turnID, n)
	return nil
}

// Catalog asks turn.tools for turn a1.t1 and returns the tools and their
// names in order.
func (g *Gateway) Catalog(c protocol.Context) (json.RawMessage, []string) {
	g.T.Helper()
	return g.CatalogFor("a1", "t1", c)
}

// CatalogFor is Catalog for any turn.
func (g *Gateway) CatalogFor(agent, turnID string, c protocol.Context) (json.RawMessage, []string) {
	g.T.Helper()
	req, _ := json.Marshal(protocol.CatalogRequest{AgentID: agent, TurnID: turnID, Context: c})
	m, err := g.NC.Request(protocol.SubjectTools, req, 10*time.Second)
	if err != nil {
		g.T.Fatal(err)
	}
	var reply protocol.CatalogReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		g.T.Fatalf("catalog reply %s: %v", m.Data, err)
	}
	var defs []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(reply.Tools, &defs); err != nil {
		g.T.Fatal(err)
	}
	names := []string{}
	for _, d := range defs {
		names = append(names, d.Name)
	}
	return reply.Tools, names
}

// CategoryCatalog is what a category's catalog golden file pins: the
// main-turn catalog with no bindings, with binding bound, and with it
// false beside another binding (the definitions of whichever case lists
// tools). A task turn's catalog is fixed: no category is asked for it.
func (g *Gateway) CategoryCatalog(binding string) map[string]any {
	g.T.Helper()
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
		{"main turn, " + binding + " bound", protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{binding: true}}},
		{"main turn, " + binding + " false", protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{binding: false, "brain": true}}},
	} {
		ts, names := g.Catalog(c.ctx)
		if len(names) > 0 {
			defs = ts
		}
		rows = append(rows, row{Case: c.name, Tools: names})
	}
	return map[string]any{"cases": rows, "definitions": defs}
}
