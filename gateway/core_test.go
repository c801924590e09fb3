package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// TestCoreReadsFallBackToTheStream: a run reads its step's events from
// core subscriptions and creates no consumer; when the core subscription
// missed the events (here it is gone before they are published), the run
// reads them from the stream instead of waiting for ever.
func TestCoreReadsFallBackToTheStream(t *testing.T) {
	t.Parallel() // its own server
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, subject := range map[string]string{
		protocol.StreamCalls:   protocol.PrefixCall + ".*.*",
		protocol.StreamOutputs: protocol.PrefixOutput + ".*.*",
		protocol.StreamDead:    protocol.PrefixDead + ".*.*",
	} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(nc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	item, _ := json.Marshal(map[string]string{"type": "function_call", "call_id": "c1", "name": "ping", "arguments": "{}"})
	run, err := c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t1", Context: protocol.Context{Kind: protocol.KindText},
		Output: []json.RawMessage{item}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	outputs, err := js.Stream(ctx, protocol.StreamOutputs)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := outputs.Info(ctx); err != nil || info.State.Consumers != 0 {
		t.Fatalf("consumers on %s after Send: %v %v, want none", protocol.StreamOutputs, info, err)
	}

	// The events the core subscription misses.
	if err := run.coreSubs[0].Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	out := `{"type":"function_call_output","call_id":"c1","output":"pong"}`
	subject := protocol.Subject(protocol.PrefixOutput, "a1", "t1")
	for _, ev := range []string{
		`{"type":"call.output","agent_id":"a1","turn_id":"t1","step":0,"call_id":"c1","status":"ok","item":` + out + `}`,
		`{"type":"step.done","agent_id":"a1","turn_id":"t1","step":0,"items":[` + out + `]}`,
	} {
		if _, err := js.Publish(ctx, subject, []byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	done, err := run.Wait(ctx)
	if err != nil || done.Step != 0 || len(done.Items) != 1 {
		t.Fatalf("Wait: %+v %v, want the step.done read from the stream", done, err)
	}
}
