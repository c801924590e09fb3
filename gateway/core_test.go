package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// streams creates the streams a run reads, as a worker would.
func streams(t *testing.T, ctx context.Context, js jetstream.JetStream) {
	t.Helper()
	for name, subject := range map[string]string{
		protocol.StreamCalls:   protocol.PrefixCall + ".*.*",
		protocol.StreamOutputs: protocol.PrefixOutput + ".*.*",
		protocol.StreamDead:    protocol.PrefixDead + ".*.*",
	} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
	}
}

// publishDone publishes the events of step 0 of turn a1.t1 (call c1).
func publishDone(t *testing.T, ctx context.Context, js jetstream.JetStream) {
	t.Helper()
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
}

func sendStep(t *testing.T, ctx context.Context, c *Client) *StepRun {
	t.Helper()
	item, _ := json.Marshal(map[string]string{"type": "function_call", "call_id": "c1", "name": "ping", "arguments": "{}"})
	run, err := c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t1", Context: protocol.Context{Kind: protocol.KindText},
		Output: []json.RawMessage{item}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run.Close)
	return run
}

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
	streams(t, ctx, js)
	c, err := New(nc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := sendStep(t, ctx, c)
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
	publishDone(t, ctx, js)
	done, err := run.Wait(ctx)
	if err != nil || done.Step != 0 || len(done.Items) != 1 {
		t.Fatalf("Wait: %+v %v, want the step.done read from the stream", done, err)
	}
}

// TestCoreReadsRefusedReadTheStream: a connection that may not subscribe
// to the turns' output subjects (a deployment's permissions) reads every
// run from the stream from the start, not after the grace period.
func TestCoreReadsRefusedReadTheStream(t *testing.T) {
	t.Parallel() // its own server
	srv := natstest.StartWith(t, func(o *server.Options) {
		o.Users = []*server.User{
			{Username: "admin", Password: "admin"},
			{Username: "gw", Password: "gw", Permissions: &server.Permissions{
				Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>", protocol.PrefixActive + ".>"}}}},
		}
	})
	connect := func(user string) *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(user, user))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	admin, err := jetstream.New(connect("admin"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	streams(t, ctx, admin)
	c, err := New(connect("gw"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the first run finds out, the second knows
		run := sendStep(t, ctx, c)
		if run.c.coreReads() || run.consOf == nil {
			t.Fatalf("core reads %v, stream reader %v: want the stream from the start", run.c.coreReads(), run.consOf)
		}
		run.Close()
	}
	run := sendStep(t, ctx, c)
	publishDone(t, ctx, admin)
	if done, err := run.Wait(ctx); err != nil || len(done.Items) != 1 {
		t.Fatalf("Wait: %+v %v", done, err)
	}
}
