package deployments_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/backgroundjobs"
	"github.com/agentbull/toolruntime/internal/category/brain"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/category/schedules"
	"github.com/agentbull/toolruntime/internal/category/todo"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
)

const wait = 15 * time.Second

// TestSingleNodePermissions starts nats/single.conf and proves that its
// users can do their jobs and nothing more: the worker user sets up the
// protocol's streams, consumers and buckets and runs a real worker
// (main turns, workflow task turns, cancels, catalogs, dead letters), the
// gateway user drives it, and each is refused what belongs to the other.
func TestSingleNodePermissions(t *testing.T) {
	t.Parallel() // its own servers; the run's passwords (sharedPasswords)
	pw := sharedPasswords()
	srv, srvLog := startServer(t, loadConfig(t, "nats/single.conf"))
	addr := srv.ClientURL()
	defer func() {
		if t.Failed() {
			t.Logf("server permission violations:\n%s", strings.Join(srvLog.matching("Violation"), "\n"))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin := connect(t, addr, "admin", pw.admin)
	gw := connect(t, addr, "gateway", pw.gateway)
	wk := connect(t, addr, "worker", pw.worker)
	runner := connect(t, addr, "runner", pw.runner)

	// The worker's set-up, with the worker's permissions.
	topo := bus.Topology{}.WithDefaults()
	if err := bus.Setup(ctx, wk.js, topo); err != nil {
		t.Fatalf("bus.Setup as worker: %v", err)
	}
	// Twice: the second run looks everything up and updates nothing.
	if err := bus.Setup(ctx, wk.js, topo); err != nil {
		t.Fatalf("bus.Setup as worker, again: %v", err)
	}

	t.Run("delivery limit dead letter", func(t *testing.T) {
		deliveryLimitDeadLetter(t, ctx, admin, gw, wk, topo)
	})

	// A real worker, as cmd/worker wires it, on its own connection.
	wrk := connect(t, addr, "worker", pw.worker)
	runWorker(t, wrk)

	activity := make(chan *nats.Msg, 100)
	if _, err := gw.nc.ChanSubscribe(protocol.PrefixActive+".>", activity); err != nil {
		t.Fatal(err)
	}
	// gateway.Client.Send reads a step's events and dead letters on core
	// NATS as they are published, and reads the last event of a turn.
	for _, subj := range []string{protocol.Subject(protocol.PrefixOutput, "a1", "t1"), protocol.Subject(protocol.PrefixDead, "a1", "t1")} {
		if _, err := gw.nc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
	}
	if outs, err := gw.js.Stream(ctx, protocol.StreamOutputs); err != nil {
		t.Fatal(err)
	} else if _, err := outs.GetLastMsgForSubject(ctx, protocol.Subject(protocol.PrefixOutput, "a1", "none")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the gateway reads a turn's last event: %v", err)
	}
	t.Run("catalog", func(t *testing.T) {
		g := &gatewayClient{t: t, c: gw}
		reply := g.catalog("a1", "t1", protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{diagnostics.Binding: true}})
		if !strings.Contains(string(reply.Tools), `"name":"ping"`) || reply.Digest == "" {
			t.Fatalf("catalog %s", reply.Tools)
		}
	})

	t.Run("step", func(t *testing.T) {
		g := &gatewayClient{t: t, c: gw}
		out := g.follow(protocol.StreamOutputs, protocol.Subject(protocol.PrefixOutput, "a1", "t1"))
		g.publishStep(protocol.PrefixCall, "a1", "t1", 0, diagContext(), fcall("call_1", "ping", `{"note":"hi"}`))
		ev := g.next(out)
		if ev.Type != protocol.EventCallOutput || ev.Status != protocol.StatusOK || !strings.Contains(string(ev.Item), "pong hi") {
			t.Fatalf("first event %s", ev.raw)
		}
		if ev = g.next(out); ev.Type != protocol.EventStepDone || len(ev.Items) != 1 {
			t.Fatalf("second event %s", ev.raw)
		}
		// The worker's activity events reach the gateway.
		states := map[string]bool{}
		timeout := time.After(wait)
		for !states["started"] || !states["completed"] {
			select {
			case m := <-activity:
				var a protocol.Activity
				_ = json.Unmarshal(m.Data, &a)
				states[a.State] = true
			case <-timeout:
				t.Fatalf("activity events seen: %v", states)
			}
		}
	})

	t.Run("durable consumer with acks", func(t *testing.T) {
		cons, err := gw.js.CreateOrUpdateConsumer(ctx, protocol.StreamOutputs, jetstream.ConsumerConfig{
			Durable: "gateway-a1", AckPolicy: jetstream.AckExplicitPolicy,
			FilterSubject: protocol.PrefixOutput + ".a1.>",
		})
		if err != nil {
			t.Fatalf("gateway creating a durable consumer on %s: %v", protocol.StreamOutputs, err)
		}
		msgs, err := cons.Fetch(2, jetstream.FetchMaxWait(wait))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range msgs.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatalf("gateway acking an event: %v", err)
			}
			n++
		}
		if n != 2 {
			t.Fatalf("fetched %d events, want 2 (%v)", n, msgs.Error())
		}
		info, err := cons.Info(ctx)
		if err != nil || info.AckFloor.Consumer != 2 {
			t.Fatalf("ack floor %+v (%v)", info, err)
		}
	})

	t.Run("workflow", func(t *testing.T) {
		g := &gatewayClient{t: t, c: gw}
		g.workflow(ctx)
	})

	t.Run("cancel", func(t *testing.T) {
		g := &gatewayClient{t: t, c: gw}
		// The cancel mark is written by every worker that hears it; a later
		// step of the turn is answered with aborted outputs.
		if err := gw.nc.Publish(protocol.Subject(protocol.PrefixCancel, "a1", "t9"), []byte(`{"reason":"user stop"}`)); err != nil {
			t.Fatal(err)
		}
		kv, err := admin.js.KeyValue(ctx, protocol.BucketState)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(wait)
		for {
			if _, err := kv.Get(ctx, protocol.TurnKey("a1", "t9", "cancel")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the worker never recorded the cancel")
			}
			time.Sleep(20 * time.Millisecond)
		}
		out := g.follow(protocol.StreamOutputs, protocol.Subject(protocol.PrefixOutput, "a1", "t9"))
		g.publishStep(protocol.PrefixCall, "a1", "t9", 0, diagContext(), fcall("c1", "ping", `{}`))
		ev := g.next(out)
		if ev.Error == nil || ev.Error.Kind != "aborted" {
			t.Fatalf("call of a cancelled turn: %s", ev.raw)
		}
		if ev = g.next(out); ev.Type != protocol.EventStepDone || !ev.EndTurn {
			t.Fatalf("step.done of a cancelled turn: %s", ev.raw)
		}
	})

	t.Run("approval", func(t *testing.T) {
		// A step held for approval (the context names ping), answered by
		// the gateway; then one held and cancelled: the worker's timer,
		// its purge, the cancel note and the approvals consumer at work.
		g := &gatewayClient{t: t, c: gw}
		held := diagContext()
		held.Approval = protocol.ApprovalScope{Names: []string{"ping"}}
		out := g.follow(protocol.StreamOutputs, protocol.Subject(protocol.PrefixOutput, "a1", "ap"))
		g.publishStep(protocol.PrefixCall, "a1", "ap", 0, held, fcall("c1", "ping", `{}`))
		if ev := g.next(out); ev.Type != protocol.EventStepPending {
			t.Fatalf("got %s, want step.pending", ev.raw)
		}
		g.publish(protocol.Subject(protocol.PrefixApproval, "a1", "ap"), protocol.ApprovalMsgID("a1", "ap", 0, 1),
			[]byte(`{"agent_id":"a1","turn_id":"ap","step":0,"decisions":[{"call_id":"c1","approved":true}]}`))
		if ev := g.next(out); ev.Type != protocol.EventCallOutput || ev.Status != protocol.StatusOK {
			t.Fatalf("approved call: %s", ev.raw)
		}
		if ev := g.next(out); ev.Type != protocol.EventStepDone {
			t.Fatalf("got %s, want step.done", ev.raw)
		}
		g.publishStep(protocol.PrefixCall, "a1", "ap", 1, held, fcall("c1", "ping", `{}`))
		if ev := g.next(out); ev.Type != protocol.EventStepPending {
			t.Fatalf("got %s, want step.pending", ev.raw)
		}
		if err := gw.nc.Publish(protocol.Subject(protocol.PrefixCancel, "a1", "ap"), []byte(`{"reason":"user stop"}`)); err != nil {
			t.Fatal(err)
		}
		if ev := g.next(out); ev.Error == nil || ev.Error.Kind != "aborted" {
			t.Fatalf("held call of a cancelled turn: %s", ev.raw)
		}
		if ev := g.next(out); ev.Type != protocol.EventStepDone || !ev.EndTurn {
			t.Fatalf("step.done of a cancelled turn: %s", ev.raw)
		}
	})

	t.Run("tool categories", func(t *testing.T) {
		g := &gatewayClient{t: t, c: gw}
		g.categories(ctx, admin, runner)
	})

	t.Run("malformed step dead letter", func(t *testing.T) {
		g := &gatewayClient{t: t, c: gw}
		g.publish(protocol.Subject(protocol.PrefixCall, "a1", "bad"), "", []byte("this is not a step"))
		m := waitForLastMsg(t, ctx, admin.js, protocol.StreamDead, protocol.Subject(protocol.PrefixDead, "a1", "bad"))
		if !strings.HasPrefix(m.Header.Get(protocol.HeaderDeadReason), "malformed step") {
			t.Fatalf("dead letter reason %q", m.Header.Get(protocol.HeaderDeadReason))
		}
	})

	// Everything above ran without a single refusal.
	gw.noErrors(t)
	wk.noErrors(t)
	wrk.noErrors(t)
	runner.noErrors(t)
	if v := srvLog.matching("Violation"); len(v) > 0 {
		t.Fatalf("the server refused something the users need:\n%s", strings.Join(v, "\n"))
	}
	if t.Failed() {
		return
	}

	t.Run("gateway denials", func(t *testing.T) {
		for _, subj := range []string{
			"turn.call.output.x.y",                               // events are the workers'
			"turn.dead.x.y",                                      // dead letters too
			"workflow.event.x",                                   // workflow events too
			"turn.activity.x.y",                                  // activity too
			"$KV.TURN_STATE.x",                                   // no writing the journal
			"$KV.WORKFLOWS.wf.x",                                 // nor workflow records
			"$JS.API.STREAM.DELETE.TURN_CALLS",                   // no administration
			"$JS.API.STREAM.PURGE.TURN_OUTPUTS",                  //
			"$JS.API.STREAM.CREATE.OTHER",                        //
			"$JS.API.CONSUMER.CREATE.TURN_CALLS.thief",           // no taking steps
			"$JS.API.CONSUMER.MSG.NEXT.TURN_CALLS.turn-workers",  //
			"$JS.API.STREAM.INFO.KV_TURN_STATE",                  // no reading the buckets
			"$JS.API.DIRECT.GET.KV_WORKFLOWS",                    //
			"schedule.def.a.b",                                   // schedules are the worker's
			"schedule.fire.a.b",                                  // fires the server's
			"$JS.API.CONSUMER.CREATE.SCHEDULES.x.schedule.def.>", // definitions are not the gateway's to read
			"$JS.API.CONSUMER.CREATE.SCHEDULES.x",                // nor unfiltered
			"job.start.a.b",                                      // jobs are the worker's and the runner's
			"job.report.a.b",                                     //
			"$KV.JOBS.job.a.b",                                   //
		} {
			deniedPublish(t, gw, subj)
		}
		for _, subj := range []string{"turn.call.>", "turn.task.a.b", "$KV.>", "turn.cancel.*.*", "turn.tools", "$SRV.PING"} {
			deniedSubscribe(t, gw, subj)
		}
		// A refused publish stores nothing.
		s, err := admin.js.Stream(ctx, protocol.StreamOutputs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetLastMsgForSubject(ctx, "turn.call.output.x.y"); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("a refused event was stored (%v)", err)
		}
		if _, err := admin.js.Stream(ctx, protocol.StreamCalls); err != nil {
			t.Errorf("TURN_CALLS is gone after the gateway's refused delete: %v", err)
		}
	})

	t.Run("worker denials", func(t *testing.T) {
		for _, subj := range []string{
			"turn.call.a.b",     // steps are the gateway's
			"turn.task.a.b",     //
			"turn.cancel.a.b",   // and cancels
			"turn.approval.a.b", // and answers
			"turn.tools",        // no asking for catalogs
			"$JS.API.STREAM.DELETE.TURN_CALLS",
			"$JS.API.STREAM.PURGE.TURN_OUTPUTS",
			"$JS.API.STREAM.CREATE.OTHER",
			"$JS.API.CONSUMER.DELETE.TURN_CALLS.turn-workers",
			"$JS.API.CONSUMER.CREATE.TURN_OUTPUTS.reader",
			"$JS.API.STREAM.MSG.DELETE.TURN_OUTPUTS",
			"$KV.OTHER.x",
			"schedule.fire.a.b", // the server fires schedules
			"job.report.a.b",    // the runner reports
			"$JS.API.STREAM.PURGE.TURN_CALLS",
		} {
			deniedPublish(t, wk, subj)
		}
		for _, subj := range []string{"turn.call.>", "turn.activity.>", "turn.call.output.>", "$JS.EVENT.>"} {
			deniedSubscribe(t, wk, subj)
		}
	})

	t.Run("runner denials", func(t *testing.T) {
		for _, subj := range []string{
			"job.start.a.b",  // announcements are the worker's
			"job.cancel.a.b", //
			"$KV.JOBS.job.a.b",
			"turn.call.a.b",
			"turn.call.output.a.b",
			"$JS.API.CONSUMER.CREATE.JOB_EVENTS.job-reports",                // the workers' consumer
			"$JS.API.CONSUMER.CREATE.JOB_EVENTS.job-reports.job.report.*.*", //
			"$JS.API.CONSUMER.DELETE.JOB_EVENTS.job-reports",                //
			"$JS.API.CONSUMER.MSG.NEXT.JOB_EVENTS.job-reports",              //
			"$JS.API.STREAM.PURGE.JOB_EVENTS",
			"$JS.API.CONSUMER.CREATE.TURN_OUTPUTS.x",
		} {
			deniedPublish(t, runner, subj)
		}
		for _, subj := range []string{"turn.>", "job.>", "$SRV.>"} {
			deniedSubscribe(t, runner, subj)
		}
	})
}

// deniedPublish publishes to subj as c and waits for the server to refuse.
func deniedPublish(t *testing.T, c *client, subj string) {
	t.Helper()
	if err := c.nc.Publish(subj, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_ = c.nc.Flush()
	if c.errs.waitFor("permissions violation", "publish", `"`+subj+`"`) == nil {
		t.Errorf("%s may publish to %s", c.user, subj)
	}
}

// deniedSubscribe subscribes to subj as c and waits for the refusal.
func deniedSubscribe(t *testing.T, c *client, subj string) {
	t.Helper()
	sub, err := c.nc.SubscribeSync(subj)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = c.nc.Flush()
	if c.errs.waitFor("permissions violation", "subscription", `"`+subj+`"`) == nil {
		t.Errorf("%s may subscribe to %s", c.user, subj)
	}
}

// deliveryLimitDeadLetter runs the worker's dead-lettering of a step that
// reached its delivery limit, with the worker's permissions: the
// max-deliveries advisory, reading the step from the work queue, copying
// it to TURN_DEAD and deleting it.
func deliveryLimitDeadLetter(t *testing.T, ctx context.Context, admin, gw, wk *client, topo bus.Topology) {
	g := &gatewayClient{t: t, c: gw}
	g.publish(protocol.Subject(protocol.PrefixCall, "a1", "limit"), "a1.limit.0", []byte(`{"step":"never processed"}`))

	dead := &bus.DeadLetters{JS: wk.js, Pub: &bus.Publisher{JS: wk.js, Logger: testLogger()}}
	sub, err := dead.WatchDeliveryLimit(wk.nc, protocol.StreamCalls, protocol.ConsumerCalls, nil, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	cons, err := wk.js.Consumer(ctx, protocol.StreamCalls, protocol.ConsumerCalls)
	if err != nil {
		t.Fatal(err)
	}
	deliveries := 0
	deadline := time.Now().Add(wait)
	for deliveries < topo.MaxDeliver && time.Now().Before(deadline) {
		msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range msgs.Messages() {
			deliveries++
			if err := m.Nak(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if deliveries != topo.MaxDeliver {
		t.Fatalf("delivered %d times, want %d", deliveries, topo.MaxDeliver)
	}
	// One more pull makes the server notice the limit (it delivers nothing).
	msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		t.Errorf("delivered beyond the limit: %s", m.Subject())
	}
	m := waitForLastMsg(t, ctx, admin.js, protocol.StreamDead, protocol.Subject(protocol.PrefixDead, "a1", "limit"))
	if !strings.HasPrefix(m.Header.Get(protocol.HeaderDeadReason), "delivery limit reached") {
		t.Fatalf("dead letter reason %q", m.Header.Get(protocol.HeaderDeadReason))
	}
	calls, err := admin.js.Stream(ctx, protocol.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := calls.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the step is still in the work queue: %+v", info.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitForLastMsg waits for a message on subject in stream.
func waitForLastMsg(t *testing.T, ctx context.Context, js jetstream.JetStream, stream, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		m, err := s.GetLastMsgForSubject(ctx, subject)
		if err == nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing on %s in %s: %v", subject, stream, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runWorker runs a worker the way cmd/worker wires it with its default
// flags (todo, brain, schedules, background jobs with their report
// watcher, workflows, and diagnostics) on c until the test ends.
func runWorker(t *testing.T, c *client) {
	t.Helper()
	log := testLogger()
	ctx, cancel := context.WithCancel(context.Background())
	cats, err := newCategories(ctx, c.js, bus.Topology{}, log)
	if err != nil {
		cancel()
		t.Fatalf("the categories' set-up with the worker user: %v", err)
	}
	w, err := engine.New(ctx, c.nc, engine.Config{Name: "perm-test", Version: "0.1.0", Grace: 5 * time.Second}, turn.NewAssembler(cats.categories...), cats.workflows, log)
	if err != nil {
		cancel()
		t.Fatalf("worker.New with the worker user: %v", err)
	}
	done := make(chan error, 2)
	go func() { done <- w.Run(ctx) }()
	go func() { done <- cats.jobs.Watch(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("worker: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("worker did not stop")
			}
		}
	})
}

// gatewayClient plays the gateway with the gateway user.
type gatewayClient struct {
	t *testing.T
	c *client
}

func diagContext() protocol.Context {
	return protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{diagnostics.Binding: true}}
}

func fcall(id, name, args string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "function_call", "call_id": id, "name": name, "arguments": args})
	return b
}

// catalog asks for a turn's catalog, waiting for a worker to answer.
func (g *gatewayClient) catalog(agent, turnID string, c protocol.Context) protocol.CatalogReply {
	g.t.Helper()
	req, _ := json.Marshal(protocol.CatalogRequest{AgentID: agent, TurnID: turnID, Context: c})
	deadline := time.Now().Add(wait)
	for {
		m, err := g.c.nc.Request(protocol.SubjectTools, req, time.Second)
		if err == nil {
			if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
				g.t.Fatalf("catalog error %s: %s", code, m.Header.Get("Nats-Service-Error"))
			}
			var reply protocol.CatalogReply
			if err := json.Unmarshal(m.Data, &reply); err != nil {
				g.t.Fatal(err)
			}
			return reply
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("catalog request: %v", err)
		}
	}
}

func (g *gatewayClient) publish(subject, msgID string, data []byte) {
	g.t.Helper()
	m := nats.NewMsg(subject)
	m.Data = data
	if msgID != "" {
		m.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := g.c.js.PublishMsg(ctx, m); err != nil {
		g.t.Fatalf("gateway publishing to %s: %v", subject, err)
	}
}

func (g *gatewayClient) publishStep(prefix, agent, turnID string, step int64, c protocol.Context, output ...json.RawMessage) {
	g.t.Helper()
	if output == nil {
		output = []json.RawMessage{}
	}
	body, _ := json.Marshal(map[string]any{"agent_id": agent, "turn_id": turnID, "step": step, "context": c, "output": output})
	g.publish(protocol.Subject(prefix, agent, turnID), protocol.StepMsgID(agent, turnID, step), body)
}

// follow reads a subject of a stream from its start with an ordered
// consumer, as a gateway does.
func (g *gatewayClient) follow(stream, subject string) jetstream.Consumer {
	g.t.Helper()
	c, err := g.c.js.OrderedConsumer(context.Background(), stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		g.t.Fatalf("gateway reading %s: %v", stream, err)
	}
	return c
}

// gwEvent is any event the gateway reads.
type gwEvent struct {
	Type       string `json:"type"`
	Status     string `json:"status"`
	Error      *struct{ Kind string }
	Item       json.RawMessage   `json:"item"`
	Details    json.RawMessage   `json:"details"`
	Items      []json.RawMessage `json:"items"`
	EndTurn    bool              `json:"end_turn"`
	Task       *protocol.Verdict
	WorkflowID string `json:"workflow_id"`
	TaskID     string `json:"task_id"`
	TurnID     string `json:"turn_id"`
	raw        []byte
}

func (g *gatewayClient) next(c jetstream.Consumer) gwEvent {
	g.t.Helper()
	m, err := c.Next(jetstream.FetchMaxWait(wait))
	if err != nil {
		g.t.Fatalf("waiting for an event: %v", err)
	}
	var ev gwEvent
	if err := json.Unmarshal(m.Data(), &ev); err != nil {
		g.t.Fatal(err)
	}
	ev.raw = m.Data()
	return ev
}

// workflow starts a one-task workflow in a main turn, follows its events
// on WORKFLOW_EVENTS, runs the task turn to an accepted result and lists
// the agent's workflows: the worker's KV, events and task consumer at work.
func (g *gatewayClient) workflow(ctx context.Context) {
	t := g.t
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`)
	args, _ := json.Marshal(map[string]any{"title": "perm", "tasks": []any{map[string]any{"id": "q1", "instructions": "Answer.", "result_schema": schema}}})
	main := g.follow(protocol.StreamOutputs, protocol.Subject(protocol.PrefixOutput, "a1", "main"))
	g.publishStep(protocol.PrefixCall, "a1", "main", 0, protocol.Context{Kind: protocol.KindText}, fcall("m0", workflowtask.StartWorkflowName, string(args)))
	ev := g.next(main)
	if ev.Status != protocol.StatusOK {
		t.Fatalf("start_workflow: %s", ev.raw)
	}
	var started struct {
		WorkflowID string `json:"workflow_id"`
	}
	if err := json.Unmarshal(ev.Details, &started); err != nil || started.WorkflowID == "" {
		t.Fatalf("start_workflow details %s", ev.Details)
	}
	g.next(main) // step.done
	wf := started.WorkflowID

	events := g.follow(protocol.StreamWorkflows, protocol.PrefixWFEvt+"."+wf)
	var ready gwEvent
	for ready.Type != protocol.EventTaskReady {
		ready = g.next(events)
	}
	tc := protocol.Context{Kind: protocol.KindWorkflowTask, WorkflowID: wf, TaskID: ready.TaskID}
	if reply := g.catalog("a1", ready.TurnID, tc); !strings.Contains(string(reply.Tools), workflowtask.SubmitResultName) {
		t.Fatalf("task catalog %s", reply.Tools)
	}
	task := g.follow(protocol.StreamOutputs, protocol.Subject(protocol.PrefixOutput, "a1", ready.TurnID))
	g.publishStep(protocol.PrefixTask, "a1", ready.TurnID, 0, tc, fcall("s1", workflowtask.SubmitResultName, `{"result":{"answer":"42"}}`))
	for ev = g.next(task); ev.Type != protocol.EventStepDone; ev = g.next(task) {
	}
	if ev.Task == nil || ev.Task.Status != protocol.VerdictAccepted || !ev.EndTurn {
		t.Fatalf("task step.done %s", ev.raw)
	}
	var types []string
	for !slices.Contains(types, protocol.EventWorkflowCompleted) {
		types = append(types, g.next(events).Type)
	}
	if !slices.Contains(types, protocol.EventTaskAccepted) {
		t.Errorf("workflow events %v", types)
	}

	g.publishStep(protocol.PrefixCall, "a1", "main", 1, protocol.Context{Kind: protocol.KindText}, fcall("m1", workflowtask.ListWorkflowsName, `{}`))
	if ev = g.next(main); ev.Status != protocol.StatusOK || !strings.Contains(string(ev.Item), wf) {
		t.Fatalf("list_workflows: %s", ev.raw)
	}
	g.next(main)
}

// TestPasswordsFromEnvironment checks what accounts.conf says about
// passwords: a missing variable stops the server from loading the file,
// and a bcrypt hash works when the variable keeps its double quotes.
func TestPasswordsFromEnvironment(t *testing.T) {
	setPasswords(t)
	unsetEnv(t, "SYS_PASSWORD")
	if _, err := server.ProcessConfigFile("nats/single.conf"); err == nil || !strings.Contains(err.Error(), "SYS_PASSWORD") {
		t.Fatalf("loading without SYS_PASSWORD: %v, want an error naming it", err)
	}

	pw := setPasswords(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("gateway secret!"), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GATEWAY_PASSWORD", `"`+string(hash)+`"`)
	srv, _ := startServer(t, loadConfig(t, "nats/single.conf"))
	connect(t, srv.ClientURL(), "gateway", "gateway secret!")
	connect(t, srv.ClientURL(), "worker", pw.worker)
	if _, err := nats.Connect(srv.ClientURL(), nats.UserInfo("gateway", "wrong")); err == nil {
		t.Fatal("connected with a wrong password")
	}
	if _, err := nats.Connect(srv.ClientURL()); err == nil {
		t.Fatal("connected without a user")
	}
}

// TestClusterForms starts cluster/n1.conf, n2.conf and n3.conf in
// process (ports and routes moved to free local ports), checks that the
// three routes form one cluster with a JetStream meta leader, that the
// worker user sets up everything a worker creates with replicas 3, and
// that a step is still accepted with one node down.
func TestClusterForms(t *testing.T) {
	t.Parallel() // its own servers; the run's passwords (sharedPasswords)
	pw := sharedPasswords()
	ports := freePorts(t, 3)
	var servers []*server.Server
	var urls []string
	for i, name := range []string{"n1", "n2", "n3"} {
		opts := loadConfig(t, fmt.Sprintf("nats/cluster/%s.conf", name))
		if opts.ServerName != name || opts.Cluster.Name != "agents" || !opts.JetStream {
			t.Fatalf("%s.conf: server_name %q, cluster %q, jetstream %v", name, opts.ServerName, opts.Cluster.Name, opts.JetStream)
		}
		if len(opts.Routes) != 3 {
			t.Fatalf("%s.conf: %d routes, want 3", name, len(opts.Routes))
		}
		if opts.SyncAlways != true {
			t.Errorf("%s.conf: sync_interval is not always", name)
		}
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", ports[i]
		opts.Routes = []*url.URL{routeURL(ports[0]), routeURL(ports[1]), routeURL(ports[2])}
		s, _ := startServer(t, opts)
		servers = append(servers, s)
		urls = append(urls, s.ClientURL())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, routed := "", true
		for _, s := range servers {
			if s.NumRoutes() < 2 {
				routed = false
			}
			if s.JetStreamIsLeader() {
				leader = s.Name()
			}
		}
		if routed && leader != "" {
			t.Logf("cluster formed, meta leader %s", leader)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cluster: routed %v, meta leader %q", routed, leader)
		}
		time.Sleep(50 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wk := connect(t, strings.Join(urls, ","), "worker", pw.worker)
	var err error
	for {
		// Right after the election the meta layer may still answer "no
		// leader" for a moment: the worker's own start retries the same way
		// (it exits and is restarted).
		if err = setupAll(ctx, wk.js, bus.Topology{Replicas: 3}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's set-up with replicas 3 as worker: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	s, err := wk.js.Stream(ctx, protocol.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	if info := s.CachedInfo(); info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("TURN_CALLS is not replicated on three nodes: %+v", info.Cluster)
	}

	// One node down: an R3 stream still takes steps.
	servers[2].Shutdown()
	servers[2].WaitForShutdown()
	gw := connect(t, urls[0]+","+urls[1], "gateway", pw.gateway)
	g := &gatewayClient{t: t, c: gw}
	g.publishStep(protocol.PrefixCall, "a1", "t1", 0, diagContext(), fcall("c1", "ping", `{}`))
	gw.noErrors(t)
	wk.noErrors(t)
}

// unsetEnv removes an environment variable for the rest of the test.
func unsetEnv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // restores the old value when the test ends
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}

// call runs a one-call main-turn step in a turn of its own and returns the
// call's event.
func (g *gatewayClient) call(turnID string, c protocol.Context, name string, args any) gwEvent {
	g.t.Helper()
	a, _ := json.Marshal(args)
	out := g.follow(protocol.StreamOutputs, protocol.Subject(protocol.PrefixOutput, "a1", turnID))
	g.publishStep(protocol.PrefixCall, "a1", turnID, 0, c, fcall("c1", name, string(a)))
	ev := g.next(out)
	if ev.Type != protocol.EventCallOutput {
		g.t.Fatalf("%s: %s", name, ev.raw)
	}
	if ev.Status != protocol.StatusOK {
		g.t.Fatalf("%s failed: %s", name, ev.raw)
	}
	if done := g.next(out); done.Type != protocol.EventStepDone {
		g.t.Fatalf("%s: %s", name, done.raw)
	}
	return ev
}

// categories uses every tool category that keeps state in NATS: todo and
// brain (their buckets, the brain's watch), schedules (definition, a fire
// the gateway reads, listing, purge) and background jobs (announcement
// the runner reads, its report the workers apply, cancel).
func (g *gatewayClient) categories(ctx context.Context, admin, runner *client) {
	t := g.t
	c := protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{brain.Binding: true, schedules.Binding: true, backgroundjobs.Binding: true}}

	g.call("todo1", c, todo.WriteName, map[string]any{"items": []any{map[string]any{"content": "check permissions", "status": todo.InProgress}}})
	if ev := g.call("todo2", c, todo.ReadName, map[string]any{}); strings.Contains(string(ev.Item), "check permissions") {
		t.Errorf("todo_read of another turn sees this turn's list: %s", ev.Item)
	}

	g.call("brain1", c, brain.WritePageName, map[string]any{"page": "Notes", "content": "The answer is forty-two."})
	if ev := g.call("brain2", c, brain.RecallName, map[string]any{"query": "answer"}); !strings.Contains(string(ev.Item), "Notes") {
		t.Errorf("recall: %s", ev.Item)
	}

	// A one-off schedule two seconds ahead; the gateway reads its fire.
	fires, err := g.c.js.CreateOrUpdateConsumer(ctx, protocol.StreamSchedules, jetstream.ConsumerConfig{
		Durable: "gateway-fires", FilterSubject: protocol.PrefixScheduleFire + ".>", AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatalf("gateway consumer on %s: %v", protocol.StreamSchedules, err)
	}
	at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	ev := g.call("sched1", c, schedules.CreateName, map[string]any{"instructions": "Say hello.", "at": at})
	var sc struct {
		ScheduleID string `json:"schedule_id"`
	}
	if err := json.Unmarshal(ev.Details, &sc); err != nil || sc.ScheduleID == "" {
		t.Fatalf("create_schedule details %s", ev.Details)
	}
	msgs, err := fires.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatal(err)
	}
	fired := 0
	for m := range msgs.Messages() {
		if !strings.Contains(string(m.Data()), sc.ScheduleID) {
			t.Errorf("fire %s", m.Data())
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Errorf("gateway acking a fire: %v", err)
		}
		fired++
	}
	if fired != 1 {
		t.Fatalf("the schedule did not fire (%v)", msgs.Error())
	}
	ev = g.call("sched2", c, schedules.CreateName, map[string]any{"instructions": "Every hour.", "every": "1h"})
	if err := json.Unmarshal(ev.Details, &sc); err != nil || sc.ScheduleID == "" {
		t.Fatalf("create_schedule details %s", ev.Details)
	}
	if ev = g.call("sched3", c, schedules.ListName, map[string]any{}); !strings.Contains(string(ev.Item), sc.ScheduleID) {
		t.Errorf("list_schedules: %s", ev.Item)
	}
	g.call("sched4", c, schedules.DeleteName, map[string]any{"schedule_id": sc.ScheduleID})

	// A job: the runner reads its announcement and reports it done.
	starts, err := runner.js.CreateOrUpdateConsumer(ctx, backgroundjobs.Stream, jetstream.ConsumerConfig{
		Durable: "runner", FilterSubjects: []string{backgroundjobs.PrefixStart + ".>", backgroundjobs.PrefixCancel + ".>"}, AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatalf("runner consumer on %s: %v", backgroundjobs.Stream, err)
	}
	ev = g.call("job1", c, backgroundjobs.StartName, map[string]any{"title": "Check", "instructions": "Check everything."})
	var job struct {
		JobID  string `json:"job_id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(ev.Details, &job); err != nil || job.JobID == "" {
		t.Fatalf("start_job details %s", ev.Details)
	}
	msgs, err = starts.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		if m.Subject() != backgroundjobs.PrefixStart+".a1."+job.JobID {
			t.Fatalf("runner got %s", m.Subject())
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatalf("runner acking: %v", err)
		}
		report := nats.NewMsg(backgroundjobs.PrefixReport + ".a1." + job.JobID)
		report.Data = []byte(`{"status":"succeeded","result":"all good"}`)
		report.Header.Set(jetstream.MsgIDHeader, job.JobID+".report.1")
		if _, err := runner.js.PublishMsg(ctx, report); err != nil {
			t.Fatalf("runner reporting: %v", err)
		}
	}
	kv, err := admin.js.KeyValue(ctx, backgroundjobs.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for job.Status != "succeeded" {
		if time.Now().After(deadline) {
			t.Fatalf("the workers never applied the runner's report: job is %q", job.Status)
		}
		time.Sleep(20 * time.Millisecond)
		if e, err := kv.Get(ctx, backgroundjobs.Key("a1", job.JobID)); err == nil {
			_ = json.Unmarshal(e.Value(), &job)
		}
	}
	if ev = g.call("job2", c, backgroundjobs.ShowName, map[string]any{"job_id": job.JobID}); !strings.Contains(string(ev.Item), "all good") {
		t.Errorf("show_job: %s", ev.Item)
	}
	ev = g.call("job3", c, backgroundjobs.StartName, map[string]any{"title": "Other", "instructions": "Never mind."})
	if err := json.Unmarshal(ev.Details, &job); err != nil {
		t.Fatal(err)
	}
	g.call("job4", c, backgroundjobs.CancelName, map[string]any{"job_id": job.JobID, "reason": "not needed"})
	waitForLastMsg(t, ctx, admin.js, backgroundjobs.Stream, backgroundjobs.PrefixCancel+".a1."+job.JobID)
}
