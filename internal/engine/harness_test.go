package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// testConfig is a worker configuration with short waits, for tests.
func testConfig() engine.Config {
	return engine.Config{
		Name:     "test",
		Grace:    5 * time.Second,
		Topology: bus.Topology{AckWait: 2 * time.Second, MaxDeliver: 3},
	}
}

// startWorker runs a worker on its own connection until the test ends.
func startWorker(t *testing.T, s *natstest.Server, cfg engine.Config, categories ...tool.Category) *engine.Worker {
	t.Helper()
	nc := s.Connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := engine.New(ctx, nc, cfg, turn.NewAssembler(categories...), nil, workertest.Logger())
	if err != nil {
		t.Fatalf("worker.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop")
		}
	})
	workertest.WaitForService(t, nc)
	return w
}

// gateway plays the gateway's part: publishing steps and reading events.
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

type call struct {
	id, name, ns, args string
}

func fc(id, name, args string) call { return call{id: id, name: name, args: args} }

// step builds a main-turn step message with diagnostics bound.
func step(agent, turnID string, n int, calls ...call) map[string]any {
	out := []any{map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "working"}}}}
	for _, c := range calls {
		item := map[string]any{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.args}
		if c.ns != "" {
			item["namespace"] = c.ns
		}
		out = append(out, item)
	}
	return map[string]any{
		"agent_id": agent, "turn_id": turnID, "step": n,
		"context": map[string]any{"kind": "text", "bindings": map[string]any{diagnostics.Binding: true}},
		"output":  out,
	}
}

func (g *gateway) publish(subject, msgID string, body any) {
	g.t.Helper()
	var data []byte
	switch b := body.(type) {
	case []byte:
		data = b
	case string:
		data = []byte(b)
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			g.t.Fatal(err)
		}
	}
	m := nats.NewMsg(subject)
	m.Data = data
	if msgID != "" {
		m.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.js.PublishMsg(ctx, m); err != nil {
		g.t.Fatalf("publish %s: %v", subject, err)
	}
}

func (g *gateway) sendStep(agent, turnID string, n int, calls ...call) {
	g.publish(protocol.Subject(protocol.PrefixCall, agent, turnID), protocol.StepMsgID(agent, turnID, int64(n)), step(agent, turnID, n, calls...))
}

// event is any event on the outputs stream.
type event struct {
	Type    string `json:"type"`
	Step    int64  `json:"step"`
	CallID  string `json:"call_id"`
	Name    string `json:"name"`
	Status  string `json:"status"`
	Error   *struct{ Kind, Message string }
	Item    json.RawMessage   `json:"item"`
	Items   []json.RawMessage `json:"items"`
	EndTurn bool              `json:"end_turn"`
	Repairs []string          `json:"repairs"`
	Raw     json.RawMessage   `json:"-"`
	Header  nats.Header       `json:"-"`
}

// events reads a turn's events from TURN_OUTPUTS as they arrive.
type events struct {
	t  *testing.T
	ch chan event
}

func (g *gateway) watch(agent, turnID string) *events {
	return g.watchSubject(protocol.StreamOutputs, protocol.Subject(protocol.PrefixOutput, agent, turnID))
}

func (g *gateway) watchSubject(stream, subject string) *events {
	g.t.Helper()
	ctx := context.Background()
	c, err := g.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		g.t.Fatal(err)
	}
	e := &events{t: g.t, ch: make(chan event, 10000)}
	cc, err := c.Consume(func(m jetstream.Msg) {
		var ev event
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			ev.Type = "unparseable"
		}
		ev.Raw = m.Data()
		ev.Header = m.Headers()
		e.ch <- ev
	})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(cc.Stop)
	return e
}

// next returns the next event, failing the test after a generous wait.
func (e *events) next() event {
	e.t.Helper()
	select {
	case ev := <-e.ch:
		return ev
	case <-time.After(60 * time.Second):
		e.t.Fatal("no event within 60s")
		return event{}
	}
}

// untilDone collects events up to and including step.done.
func (e *events) untilDone() (outputs map[string]event, done event) {
	e.t.Helper()
	outputs = map[string]event{}
	for {
		ev := e.next()
		switch ev.Type {
		case protocol.EventCallOutput:
			if _, dup := outputs[ev.CallID]; dup {
				e.t.Errorf("call %s has two call.output events", ev.CallID)
			}
			outputs[ev.CallID] = ev
		case protocol.EventStepDone:
			return outputs, ev
		default:
			e.t.Fatalf("unexpected event %s", ev.Raw)
		}
	}
}

// quiet asserts no further event arrives for a moment.
func (e *events) quiet(d time.Duration) {
	e.t.Helper()
	select {
	case ev := <-e.ch:
		e.t.Errorf("unexpected event %s", ev.Raw)
	case <-time.After(d):
	}
}

func itemOutput(t *testing.T, raw json.RawMessage) (callID, output string) {
	t.Helper()
	var it protocol.FunctionCallOutput
	if err := json.Unmarshal(raw, &it); err != nil {
		t.Fatalf("item %s: %v", raw, err)
	}
	return it.CallID, it.Output
}

// counter counts tool bodies in one process.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
}

func (c *counter) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return v
}

func newWorker(ctx context.Context, nc *nats.Conn, categories ...tool.Category) (*engine.Worker, error) {
	return engine.New(ctx, nc, testConfig(), turn.NewAssembler(categories...), nil, workertest.Logger())
}

func natsMsg(t *testing.T, subject string, body any) *nats.Msg {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subject)
	m.Data = data
	return m
}
