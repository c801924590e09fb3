package computer_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// event is a call.output or step.done as a gateway reads it.
type event struct {
	Type    string                  `json:"type"`
	CallID  string                  `json:"call_id"`
	Status  string                  `json:"status"`
	Error   *struct{ Kind string }  `json:"error"`
	Item    struct{ Output string } `json:"item"`
	Details json.RawMessage         `json:"details"`
	Items   []json.RawMessage       `json:"items"`
	EndTurn bool                    `json:"end_turn"`
	Repairs []string                `json:"repairs"`
}

// The category in a real worker on an embedded server: a turn.cancel
// aborts a running command and leaves no process behind, and a
// truncated command is refused without running.
func TestInWorker(t *testing.T) {
	needSandbox(t)
	srv := natstest.Start(t)
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)

	nc := srv.Connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := engine.Config{Name: "w1", Grace: 5 * time.Second, Topology: bus.Topology{AckWait: 2 * time.Second, MaxDeliver: 3}}
	w, err := engine.New(ctx, nc, cfg, turn.NewAssembler(c.Category()), nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker.Run: %v", err)
		}
	})

	gw := srv.Connect(t)
	js, err := jetstream.New(gw)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(turnID string, calls ...map[string]any) {
		t.Helper()
		out := make([]any, len(calls))
		for i, c := range calls {
			out[i] = map[string]any{"type": "function_call", "call_id": c["id"], "name": c["name"], "arguments": c["args"]}
		}
		body, _ := json.Marshal(map[string]any{"agent_id": agent, "turn_id": turnID, "step": 0,
			"context": map[string]any{"kind": "text", "bindings": map[string]bool{"computer": true}}, "output": out})
		m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, agent, turnID))
		m.Data = body
		m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID(agent, turnID, 0))
		if _, err := js.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	events := func(turnID string, n int) []event {
		t.Helper()
		oc, err := js.OrderedConsumer(context.Background(), protocol.StreamOutputs,
			jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, agent, turnID)}})
		if err != nil {
			t.Fatal(err)
		}
		var evs []event
		for len(evs) < n {
			m, err := oc.Next(jetstream.FetchMaxWait(20 * time.Second))
			if err != nil {
				t.Fatalf("waiting for event %d of %s: %v", len(evs)+1, turnID, err)
			}
			var ev event
			if err := json.Unmarshal(m.Data(), &ev); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		return evs
	}

	t.Run("cancel aborts a running command", func(t *testing.T) {
		m := marker()
		publish("t-cancel", map[string]any{"id": "c1", "name": "run_command",
			"args": `{"command":"sleep ` + m + ` & setsid sleep ` + m + ` & wait"}`})
		waitFor(t, "the command to start", func() bool { return len(hostProcs(m)) == 2 })
		if err := gw.Publish(protocol.Subject(protocol.PrefixCancel, agent, "t-cancel"), []byte(`{"reason":"user pressed stop"}`)); err != nil {
			t.Fatal(err)
		}
		evs := events("t-cancel", 2)
		out, stepDone := evs[0], evs[1]
		if out.Status != protocol.StatusError || out.Error == nil || out.Error.Kind != "aborted" {
			t.Errorf("call.output %+v", out)
		}
		if stepDone.Type != protocol.EventStepDone || !stepDone.EndTurn || len(stepDone.Items) != 1 {
			t.Errorf("step.done %+v", stepDone)
		}
		assertNoProcess(t, "a sleep of the cancelled command", m)
	})

	t.Run("a sandboxed command over NATS", func(t *testing.T) {
		publish("t-escape", map[string]any{"id": "c1", "name": "run_command",
			"args": `{"command":"tr '\\0' '\\n' < /proc/$PPID/environ; ps -eo args; ls -a ..; touch /usr/x; grep NoNewPrivs /proc/self/status"}`})
		evs := events("t-escape", 2)
		out := evs[0].Item.Output
		self, _ := os.Executable()
		if evs[0].Status != protocol.StatusOK || strings.Contains(out, self) || strings.Contains(out, "NATS") ||
			!strings.Contains(out, "NoNewPrivs:\t1") || !strings.Contains(out, "Read-only file system") {
			t.Errorf("call.output %+v", evs[0])
		}
	})

	t.Run("a truncated command never runs", func(t *testing.T) {
		publish("t-trunc",
			map[string]any{"id": "c1", "name": "run_command", "args": `{"command":"touch truncated-ran`},
			map[string]any{"id": "c2", "name": "run_command", "args": "```json\n{\"command\":\"echo fenced-ran\"}\n```"},
		)
		evs := events("t-trunc", 3)
		byID := map[string]event{}
		for _, ev := range evs {
			byID[ev.CallID] = ev
		}
		if ev := byID["c1"]; ev.Error == nil || ev.Error.Kind != "invalid_arguments" || !strings.Contains(ev.Item.Output, "cut off at byte 31") {
			t.Errorf("truncated: %+v", ev)
		}
		if ev := byID["c2"]; ev.Status != protocol.StatusOK || !strings.Contains(ev.Item.Output, "fenced-ran") || len(ev.Repairs) != 1 {
			t.Errorf("fenced: %+v", ev)
		}
		if _, err := os.Stat(filepath.Join(h, "truncated-ran")); !os.IsNotExist(err) {
			t.Error("the truncated command ran")
		}
	})
}
