package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/category/backgroundjobs"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/category/schedules"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// TestMain runs up to four parallel tests per core (natstest.WaitingParallel):
// they wait on NATS round trips, leases and timers.
func TestMain(m *testing.M) {
	natstest.WaitingParallel()
	os.Exit(m.Run())
}

// rig is an embedded server with a real worker serving diagnostics,
// workflows, schedules and background jobs, and a gateway client on its
// own connection.
type rig struct {
	t   testing.TB
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	c   *gateway.Client
}

func newRig(t testing.TB) *rig {
	t.Helper()
	srv := natstest.Start(t)
	workertest.RunWorker(t, srv, "w1", func(js jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		wf := workflowtask.New(js, workflowtask.Config{Logger: workertest.Logger()})
		sch, err := schedules.New(ctx, js, schedules.Config{MinInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		jb, err := backgroundjobs.New(ctx, js, backgroundjobs.Config{Logger: workertest.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = jb.Watch(ctx) }()
		return []tool.Category{sch.Category(), jb.Category(), wf.Category(), diagnostics.Category(diagnostics.Config{})}, wf
	})
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := gateway.New(nc, gateway.Options{Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, srv: srv, nc: nc, js: js, c: c}
}

var diagCtx = protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{diagnostics.Binding: true}}

// callOK runs call as step 0 of agent a1's turn and fails t unless its
// output is ok.
func (r *rig) callOK(t *testing.T, ctx context.Context, turnID string, tc protocol.Context, call json.RawMessage) {
	t.Helper()
	run, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: turnID, Step: 0, Context: tc, Output: []json.RawMessage{call}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if outs, _, _ := drain(t, ctx, run); outs["c1"] == nil || outs["c1"].Status != protocol.StatusOK {
		t.Fatalf("%s: %+v", call, outs)
	}
}

func fc(id, name, args string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "function_call", "call_id": id, "name": name, "arguments": args})
	return b
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// drain reads a run to its step.done and returns the call outputs by
// call id, in arrival order, and the activity events.
func drain(t *testing.T, ctx context.Context, run *gateway.StepRun) (map[string]*protocol.CallOutput, []*protocol.Activity, *protocol.StepDone) {
	t.Helper()
	outs := map[string]*protocol.CallOutput{}
	var acts []*protocol.Activity
	for {
		ev, err := run.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		switch ev := ev.(type) {
		case *protocol.CallOutput:
			if outs[ev.CallID] != nil {
				t.Fatalf("call %s returned twice", ev.CallID)
			}
			outs[ev.CallID] = ev
		case *protocol.Activity:
			acts = append(acts, ev)
		case *protocol.StepDone:
			if _, err := run.Next(ctx); err != io.EOF {
				t.Fatalf("Next after step.done: %v, want io.EOF", err)
			}
			return outs, acts, ev
		default:
			t.Fatalf("unexpected event %T", ev)
		}
	}
}

func TestStepStreamsOutputsActivityAndDone(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	ctx := ctxT(t)
	cat, err := r.c.Catalog(ctx, "a1", "t1", diagCtx)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := cat.Definitions()
	if err != nil || len(defs) == 0 {
		t.Fatalf("definitions: %v, %d", err, len(defs))
	}
	if !strings.Contains(string(cat.Tools), `"name":"sleep"`) {
		t.Fatalf("catalog has no sleep: %s", cat.Tools)
	}
	prose := json.RawMessage(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Two at once."}]}`)
	run, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t1", Step: 0, Context: diagCtx,
		Output: []json.RawMessage{prose, fc("c1", "sleep", `{"ms":50}`), fc("c2", "ping", `{"note":"x"}`), fc("c3", "ping", `{"note":`)}},
		gateway.WithActivity())
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	outs, _, done := drain(t, ctx, run)
	if len(outs) != 3 || outs["c1"].Status != protocol.StatusOK || outs["c2"].Status != protocol.StatusOK {
		t.Fatalf("outputs: %+v", outs)
	}
	if e := outs["c3"].Error; e == nil || e.Kind != protocol.InvalidArguments {
		t.Fatalf("c3: %+v, want invalid_arguments", outs["c3"])
	}
	if done.EndTurn || len(done.Items) != 3 || done.Task != nil {
		t.Fatalf("step.done: %+v", done)
	}
	for i, id := range []string{"c1", "c2", "c3"} {
		var item struct {
			CallID string `json:"call_id"`
		}
		if err := json.Unmarshal(done.Items[i], &item); err != nil || item.CallID != id {
			t.Fatalf("items[%d] is %s, want the output of %s", i, done.Items[i], id)
		}
	}
}

// Activity is core NATS, so a test that asserts it waits for it on its
// own rather than racing the step's end.
func TestActivityOfARunningCall(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	ctx := ctxT(t)
	run, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t1", Step: 0, Context: diagCtx,
		Output: []json.RawMessage{fc("c1", "sleep", `{"ms":300}`)}}, gateway.WithActivity())
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	ev, err := run.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := ev.(*protocol.Activity)
	if !ok || a.CallID != "c1" || a.State != protocol.ActivityStarted || a.Label != "Waiting 300 ms" {
		t.Fatalf("first event %T %+v, want c1's started activity", ev, ev)
	}
	if d, err := run.Wait(ctx); err != nil || d.Step != 0 {
		t.Fatalf("Wait: %+v, %v", d, err)
	}
}

func TestCatalogErrorReplyIsAServiceError(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	_, err := r.c.Catalog(ctxT(t), "a 1", "t1", diagCtx)
	var se *gateway.ServiceError
	if !errors.As(err, &se) || se.Code != "400" || se.Description == "" {
		t.Fatalf("err %v, want a 400 ServiceError", err)
	}
	_, err = r.c.Catalog(ctxT(t), "a1", "t1", protocol.Context{Kind: protocol.KindWorkflowTask, WorkflowID: "wf_none", TaskID: "q"})
	if !errors.As(err, &se) || se.Code != "400" {
		t.Fatalf("unknown task: %v, want a 400 ServiceError", err)
	}
}

func TestNoWorkerIsNoResponders(t *testing.T) {
	t.Parallel() // its own server
	srv := natstest.Start(t)
	c, err := gateway.New(srv.Connect(t), gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Catalog(ctxT(t), "a1", "t1", diagCtx); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("err %v, want no responders", err)
	}
}

// A turn's context asks for approvals with the public ApprovalScope; the
// catalog says which of its tools a call would wait for.
func TestCatalogApprovalScope(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	for _, c := range []struct {
		scope protocol.ApprovalScope
		want  []string
	}{
		{protocol.ApprovalScope{}, nil},
		{protocol.ApprovalScope{Names: []string{"sleep"}}, []string{"sleep"}},
		{protocol.ApprovalScope{Level: protocol.ApprovalAll}, []string{"start_workflow", "show_workflow", "list_workflows", "cancel_workflow", "ping", "sleep", "finish"}},
	} {
		tc := diagCtx
		tc.Approval = c.scope
		cat, err := r.c.Catalog(ctxT(t), "a1", "t1", tc)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cat.Approval, c.want) {
			t.Errorf("scope %+v: approval %v, want %v", c.scope, cat.Approval, c.want)
		}
	}
}

// A step the workers give up on (here its turn's tools cannot be built,
// every delivery) ends its run with the dead letter's reason, not never.
func TestDeadLetteredStepEndsTheRun(t *testing.T) {
	t.Parallel() // its own server
	srv := natstest.Start(t)
	broken := tool.Category{Name: "broken", Tools: func(_ context.Context, t tool.Turn) ([]*tool.Tool, error) {
		if t.AgentID == "broken" {
			return nil, errors.New("the tool directory is down")
		}
		return nil, nil
	}}
	// Redeliveries 50 ms apart, not 1 s doubling: the same three
	// deliveries and the same delivery-limit advisory, without the 7 s
	// wait per step.
	cfg := workertest.Config("w1")
	cfg.Topology.RetryDelay = 50 * time.Millisecond
	workertest.RunWorkerWith(t, srv, cfg, func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{diagnostics.Category(diagnostics.Config{}), broken}, nil
	})
	nc := srv.Connect(t)
	c, err := gateway.New(nc, gateway.Options{Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Step 1 after a step 0 of the turn dead-lettered too: the run of step
	// 1 must not take step 0's dead letter for its own.
	for n := range int64(2) {
		run, err := c.Send(ctx, protocol.Step{AgentID: "broken", TurnID: "t1", Step: n, Context: diagCtx, Output: []json.RawMessage{fc("c1", "ping", "{}")}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = run.Wait(ctx)
		var dl *gateway.DeadLetterError
		if !errors.As(err, &dl) || !dl.Step || !strings.Contains(dl.Reason, "delivery limit") || dl.MsgID != fmt.Sprintf("broken.t1.%d", n) {
			t.Fatalf("step %d: %v, want the step's dead letter", n, err)
		}
		if _, again := run.Next(ctx); again != err {
			t.Errorf("step %d: Next after the dead letter: %v", n, again)
		}
		run.Close()
	}
	// Another agent's turns go on.
	run, err := c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t1", Step: 0, Context: diagCtx, Output: []json.RawMessage{fc("c1", "ping", "{}")}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if done, err := run.Wait(ctx); err != nil || len(done.Items) != 1 {
		t.Fatalf("a1: %v %v", done, err)
	}
}

// A step with more calls than one step.done can answer is refused before
// it is published, as the worker would dead-letter it.
func TestSendRefusesMoreCallsThanOneStepDoneHolds(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	var out []json.RawMessage
	for i := range 12000 {
		out = append(out, fc(fmt.Sprintf("c%d", i), "p", ""))
	}
	_, err := r.c.Send(ctxT(t), protocol.Step{AgentID: "a1", TurnID: "t1", Context: diagCtx, Output: out})
	if !errors.Is(err, protocol.ErrMalformed) || !strings.Contains(err.Error(), "send fewer calls per step") {
		t.Fatalf("%v, want ErrMalformed", err)
	}
}

// A step number sent again with other calls (a gateway bug) is dropped
// by the stream as a copy: its run says so, rather than hand back the
// first step's items for calls they do not answer. A step.done that
// does not answer a new step's calls is a malformed event.
func TestStepNumberReusedWithOtherCalls(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	ctx := ctxT(t)
	send := func(turnID, callID string) *gateway.StepRun {
		run, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: turnID, Step: 0, Context: diagCtx, Output: []json.RawMessage{fc(callID, "ping", `{}`)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(run.Close)
		return run
	}
	if done, err := send("t1", "c1").Wait(ctx); err != nil || len(done.Items) != 1 {
		t.Fatalf("first: %v %v", done, err)
	}
	run := send("t1", "c9")
	if done, err := run.Wait(ctx); !errors.Is(err, gateway.ErrStepReused) {
		t.Fatalf("second: %v, %v; want ErrStepReused", done, err)
	}
	if _, err := run.Next(ctx); !errors.Is(err, gateway.ErrStepReused) {
		t.Fatalf("Next after: %v", err)
	}

	// Before the step: a step 0's run reads the turn from its start.
	r.publishEvent("t2", "", `{"type":"step.done","agent_id":"a1","turn_id":"t2","step":0,"items":[],"end_turn":true}`)
	run = send("t2", "c1")
	var bad *gateway.EventError
	for {
		ev, err := run.Next(ctx)
		if errors.As(err, &bad) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := ev.(*protocol.StepDone); ok {
			if bad == nil || len(d.Items) != 1 || d.EndTurn {
				t.Fatalf("done %+v after %v, want the worker's after an EventError", d, bad)
			}
			break
		}
	}
}

// A step sent again after TURN_CALLS forgot the first copy (its
// duplicate window is over) is stored and run again, but the worker's
// events for it, under the same message ids, are dropped by TURN_OUTPUTS,
// whose window began later, when the first run published them. The run
// must read the turn's earlier events, not wait for ever for new ones.
func TestResendAfterTheCallsWindowReadsTheFirstEvents(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	ctx := ctxT(t)
	step0 := protocol.Step{AgentID: "a1", TurnID: "t7", Step: 0, Context: diagCtx, Output: []json.RawMessage{fc("c1", "ping", `{}`)}}
	run, err := r.c.Send(ctx, step0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	run.Close()
	// Step 1 as the first gateway's run left it: its events are in the
	// stream (published by a worker), the step itself long gone from
	// TURN_CALLS.
	r.publishEvent("t7", protocol.CallOutputMsgID("a1", "t7", 1, "c9"), `{"type":"call.output","agent_id":"a1","turn_id":"t7","step":1,"call_id":"c9","name":"ping","namespace":"","status":"ok","error":null,"item":{"type":"function_call_output","call_id":"c9","output":"pong first"},"details":{},"events":[],"repairs":[],"activity":"Pinging","duration_ms":0}`)
	r.publishEvent("t7", protocol.StepDoneMsgID("a1", "t7", 1), `{"type":"step.done","agent_id":"a1","turn_id":"t7","step":1,"items":[{"type":"function_call_output","call_id":"c9","output":"pong first"}],"end_turn":false,"complete_actor_event":false,"task":null}`)
	run, err = r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t7", Step: 1, Context: diagCtx, Output: []json.RawMessage{fc("c9", "ping", `{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	done, err := run.Wait(short)
	if err != nil || len(done.Items) != 1 {
		t.Fatalf("re-sent step 1: %v, %v", done, err)
	}
}

func TestNewWithoutAConnection(t *testing.T) {
	if c, err := gateway.New(nil, gateway.Options{}); err == nil || c != nil {
		t.Fatalf("New(nil): %v, %v; want an error", c, err)
	}
}

func TestSendRefusesWhatTheWorkerWouldDeadLetter(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	for name, s := range map[string]protocol.Step{
		"bad agent id":      {AgentID: "a.1", TurnID: "t1", Context: diagCtx},
		"negative step":     {AgentID: "a1", TurnID: "t1", Step: -1, Context: diagCtx},
		"unknown kind":      {AgentID: "a1", TurnID: "t1", Context: protocol.Context{Kind: "chat"}},
		"duplicate call id": {AgentID: "a1", TurnID: "t1", Context: diagCtx, Output: []json.RawMessage{fc("c1", "ping", "{}"), fc("c1", "ping", "{}")}},
		"item not JSON":     {AgentID: "a1", TurnID: "t1", Context: diagCtx, Output: []json.RawMessage{json.RawMessage(`{"type":`)}},
		"task without ids":  {AgentID: "a1", TurnID: "t1", Context: protocol.Context{Kind: protocol.KindWorkflowTask}},
		// A nil item (a RawJSON that was empty) is sent as null, which
		// the workers skip and the provider refuses when the
		// conversation goes back to it.
		"nil item":    {AgentID: "a1", TurnID: "t1", Context: diagCtx, Output: []json.RawMessage{nil, fc("c1", "ping", "{}")}},
		"string item": {AgentID: "a1", TurnID: "t1", Context: diagCtx, Output: []json.RawMessage{json.RawMessage(` "hi"`)}},
	} {
		_, err := r.c.Send(ctxT(t), s)
		if !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		} else if strings.Count(err.Error(), protocol.ErrMalformed.Error()) != 1 || strings.Contains(err.Error(), "MarshalJSON") {
			t.Errorf("%s: %q says %q more than once", name, err, protocol.ErrMalformed)
		}
	}
	info, err := r.js.Stream(ctxT(t), protocol.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	if st := info.CachedInfo().State; st.LastSeq != 0 {
		t.Fatalf("TURN_CALLS got %d messages from refused steps", st.LastSeq)
	}
}

// publishEvent stores raw bytes on a turn's output subject, as a worker
// (or anything with the right to publish there) would.
func (r *rig) publishEvent(turnID, msgID string, data string) {
	r.t.Helper()
	m := nats.NewMsg(protocol.Subject(protocol.PrefixOutput, "a1", turnID))
	m.Data = []byte(data)
	if msgID != "" {
		m.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	if _, err := r.js.PublishMsg(ctxT(r.t), m); err != nil {
		r.t.Fatal(err)
	}
}

// A step's events may come twice (a redelivered step republishing after
// the duplicate window), mixed with other steps' events and with
// garbage: the run returns each call once, skips other steps, reports the
// garbage as errors and goes on; and so does the run of a re-sent step,
// which reads the turn from its start.
func TestRunIsRedeliverySafeAndSurvivesGarbage(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	ctx := ctxT(t)
	// Step 0 of the turn ran before: its events are in the stream, and
	// the runs for step 1 must not mistake them for their own.
	first, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t2", Step: 0, Context: diagCtx, Output: []json.RawMessage{fc("c1", "ping", `{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	first.Close()
	step1 := protocol.Step{AgentID: "a1", TurnID: "t2", Step: 1, Context: diagCtx,
		Output: []json.RawMessage{fc("c1", "ping", `{"note":"again"}`), fc("c9", "sleep", `{"ms":60000}`)}}
	run, err := r.c.Send(ctx, step1)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	// read returns the run's events to its step.done: the outputs by
	// call id (counted), the malformed events' reasons, and the step.done.
	read := func(run *gateway.StepRun, onOutput func(*protocol.CallOutput)) (map[string]int, []string, *protocol.StepDone) {
		t.Helper()
		outs := map[string]int{}
		var bad []string
		for {
			ev, err := run.Next(ctx)
			var ee *gateway.EventError
			switch {
			case errors.As(err, &ee):
				bad = append(bad, ee.Reason)
				continue
			case err != nil:
				t.Fatal(err)
			}
			switch ev := ev.(type) {
			case *protocol.CallOutput:
				if ev.Step != 1 {
					t.Fatalf("an output of step %d", ev.Step)
				}
				outs[ev.CallID]++
				if onOutput != nil {
					onOutput(ev)
				}
			case *protocol.StepDone:
				return outs, bad, ev
			}
		}
	}
	// Once c1's output is in, a copy of it (as a republish after the
	// duplicate window would store it), garbage, and then a cancel, whose
	// aborted c9 and step.done come after all of them.
	outs, bad, done := read(run, func(o *protocol.CallOutput) {
		if o.CallID != "c1" {
			return
		}
		dup, _ := json.Marshal(struct {
			Type string `json:"type"`
			*protocol.CallOutput
		}{"call.output", o})
		r.publishEvent("t2", "republished", string(dup))
		r.publishEvent("t2", "", `not json`)
		r.publishEvent("t2", "", `{"type":"call.output","agent_id":"other","turn_id":"t2","step":1,"call_id":"c9","status":"ok","item":{}}`)
		r.publishEvent("t2", "", `{"type":"call.output","agent_id":"a1","turn_id":"t2","step":1,"call_id":"c9","status":"weird","item":{}}`)
		r.publishEvent("t2", "", `{"type":"step.later","agent_id":"a1","turn_id":"t2","step":1}`)
		if err := r.c.Cancel(ctx, "a1", "t2", "enough"); err != nil {
			t.Fatal(err)
		}
	})
	if len(bad) != 3 {
		t.Fatalf("errors %q, want 3 (not JSON, other agent, bad status)", bad)
	}
	if outs["c1"] != 1 || outs["c9"] != 1 || len(outs) != 2 {
		t.Fatalf("outputs %v, want c1 and c9 once each", outs)
	}
	if done.Step != 1 || len(done.Items) != 2 || !done.EndTurn {
		t.Fatalf("step.done %+v", done)
	}

	// Sending step 1 again (a gateway that restarted) publishes nothing
	// new and reads the same events from the turn's start.
	again, err := r.c.Send(ctx, step1)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	outs2, bad2, done2 := read(again, nil)
	if len(bad2) != 3 || outs2["c1"] != 1 || outs2["c9"] != 1 || len(outs2) != 2 {
		t.Fatalf("again: outputs %v, errors %q", outs2, bad2)
	}
	if string(done2.Items[1]) != string(done.Items[1]) {
		t.Fatalf("again: step.done %+v", done2)
	}
	info, err := r.js.Stream(ctx, protocol.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.LastSeq; n != 2 {
		t.Fatalf("TURN_CALLS has %d steps, want 2: the re-send must be de-duplicated", n)
	}
}

func TestNextEndsWithItsContext(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	run, err := r.c.Send(ctxT(t), protocol.Step{AgentID: "a1", TurnID: "t3", Step: 0, Context: diagCtx,
		Output: []json.RawMessage{fc("c1", "sleep", `{"ms":60000}`)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := run.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next: %v, want context.Canceled", err)
	}
	run.Close()
	if _, err := run.Next(context.Background()); !errors.Is(err, gateway.ErrClosed) {
		t.Fatalf("Next on a closed run: %v, want ErrClosed", err)
	}
	_ = r.c.Cancel(ctxT(t), "a1", "t3", "test over")
}

func TestCancelAbortsTheRunningCall(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	ctx := ctxT(t)
	run, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t4", Step: 0, Context: diagCtx,
		Output: []json.RawMessage{fc("c1", "sleep", `{"ms":60000}`)}}, gateway.WithActivity())
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	// Cancel once the call runs, so that the cancel aborts it rather than
	// marking a turn whose step has not started.
	for {
		ev, err := run.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := ev.(*protocol.Activity); ok && a.State == protocol.ActivityStarted {
			break
		}
	}
	if err := r.c.Cancel(ctx, "a1", "t4", "the user left"); err != nil {
		t.Fatal(err)
	}
	outs, _, done := drain(t, ctx, run)
	if e := outs["c1"].Error; e == nil || e.Kind != protocol.Aborted {
		t.Fatalf("c1: %+v, want aborted", outs["c1"])
	}
	if !done.EndTurn {
		t.Fatal("a cancelled step's step.done has no end_turn")
	}
	// The reason reached the workers: the turn's cancel mark holds it.
	kv, err := r.js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	mark, err := kv.Get(ctx, protocol.TurnKey("a1", "t4", "cancel"))
	if err != nil || !strings.Contains(string(mark.Value()), "the user left") {
		t.Fatalf("cancel mark %v: %v", mark, err)
	}
	if err := r.c.Cancel(ctx, "a 1", "t4", ""); err == nil {
		t.Fatal("a cancel with a bad agent id was sent")
	}
}

// The worker side of approvals is built apart; this checks the client's
// side on the wire: a step.pending event is read and typed, and decisions
// (the first answer and a correction) are stored under the protocol's
// message ids, in the shape the worker's type reads.
func TestPendingAndDecisions(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	ctx := ctxT(t)
	// The worker made TURN_APPROVALS (answers are stored there).
	run, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t5", Step: 0, Context: diagCtx,
		Output: []json.RawMessage{fc("c1", "sleep", `{"ms":60000}`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	r.publishEvent("t5", protocol.StepPendingMsgID("a1", "t5", 0), `{"type":"step.pending","agent_id":"a1","turn_id":"t5","step":0,
		"approvals":[{"call_id":"c1","name":"sleep","namespace":"","arguments":{"ms":60000},"reason":"all","activity":"Waiting 60000 ms"}],
		"expires_at":"2026-12-02T09:00:00Z"}`)
	ev, err := run.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := ev.(*protocol.StepPending)
	if !ok || len(p.Approvals) != 1 || p.Approvals[0].CallID != "c1" || string(p.Approvals[0].Arguments) != `{"ms":60000}` || p.ExpiresAt.IsZero() {
		t.Fatalf("event %T %+v, want the step.pending", ev, ev)
	}
	if err := r.c.Decide(ctx, "a1", "t5", 0, 1, []protocol.Decision{{CallID: "c1"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Decide(ctx, "a1", "t5", 0, 2, []protocol.Decision{{CallID: "c1", Approved: false, Reason: "not on main"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Decide(ctx, "a1", "t5", 0, 0, nil); err == nil {
		t.Fatal("n 0 was accepted")
	}
	// The worker dead-letters both answers (step 0 is not held: this
	// worker holds nothing); each is an error of the run that says so,
	// and the run goes on. A dead letter of another step's answer, copied
	// as the worker copies one, is not this run's.
	dead := nats.NewMsg(protocol.Subject(protocol.PrefixDead, "a1", "t5"))
	dead.Data = []byte(`{"agent_id":"a1","turn_id":"t5","step":3,"decisions":[]}`)
	dead.Header.Set("Dead-"+jetstream.MsgIDHeader, protocol.ApprovalMsgID("a1", "t5", 3, 1))
	dead.Header.Set(protocol.HeaderDeadReason, "malformed approval: the answer misses call c1")
	dead.Header.Set(protocol.HeaderDeadSubject, "turn.approval.a1.t5")
	dead.Header.Set(jetstream.MsgIDHeader, "dead.TURN_APPROVALS.99")
	if _, err := r.js.PublishMsg(ctx, dead); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{protocol.ApprovalMsgID("a1", "t5", 0, 1): true, protocol.ApprovalMsgID("a1", "t5", 0, 2): true}
	for len(want) > 0 {
		ev, err := run.Next(ctx)
		var dl *gateway.DeadLetterError
		if errors.As(err, &dl) {
			if dl.Step || !want[dl.MsgID] || dl.Reason == "" {
				t.Fatalf("dead letter %+v, want one of step 0's answers", dl)
			}
			delete(want, dl.MsgID)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ev.(*protocol.StepDone); ok {
			t.Fatalf("step.done before the answers' dead letters %v", want)
		}
	}
	// The answers as Decide published them (their copies in TURN_DEAD).
	cons, err := r.js.OrderedConsumer(ctx, protocol.StreamDead, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"turn.dead.a1.t5"}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(3)
	if err != nil {
		t.Fatal(err)
	}
	answers := 0
	for m := range batch.Messages() {
		if m.Headers().Get(protocol.HeaderDeadSubject) != "turn.approval.a1.t5" || strings.Contains(string(m.Data()), `"step":3`) {
			continue
		}
		answers++
		var a protocol.Approval
		dec := json.NewDecoder(strings.NewReader(string(m.Data())))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil || a.AgentID != "a1" || a.Step != 0 || len(a.Decisions) != 1 || a.Decisions[0].CallID != "c1" {
			t.Fatalf("answer %s: %v", m.Data(), err)
		}
	}
	if answers != 2 {
		t.Fatalf("%d answers in TURN_DEAD, want 2", answers)
	}
	// The sleeping call would hold the worker's stop: end it.
	if err := r.c.Cancel(ctx, "a1", "t5", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// A workflow from start_workflow to the task's accepted result: the
// task.ready event from the consumer, a prose-only task step answered by
// the repair instruction, then submit_result with a value that breaks the
// schema (rejected) and one that keeps it (accepted).
func TestWorkflowTaskTurn(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	ctx := ctxT(t)
	args, _ := json.Marshal(map[string]any{"tasks": []any{map[string]any{"id": "q1", "instructions": "Answer.",
		"result_schema": map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}},
			"required": []string{"answer"}, "additionalProperties": false}}}})
	run, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "main", Step: 0, Context: protocol.Context{Kind: protocol.KindText},
		Output: []json.RawMessage{fc("s1", workflowtask.StartWorkflowName, string(args))}})
	if err != nil {
		t.Fatal(err)
	}
	done, err := run.Wait(ctx)
	run.Close()
	if err != nil || done.EndTurn {
		t.Fatalf("start_workflow: %+v, %v", done, err)
	}
	ready := make(chan *protocol.WorkflowEvent, 8)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = r.c.WorkflowEvents(cctx, "gw", func(_ context.Context, ev *protocol.WorkflowEvent) error {
			if ev.Type == protocol.EventTaskReady {
				ready <- ev
			}
			return nil
		})
	}()
	var ev *protocol.WorkflowEvent
	select {
	case ev = <-ready:
	case <-ctx.Done():
		t.Fatal("no task.ready")
	}
	if ev.TaskID != "q1" || ev.Instructions != "Answer." || ev.AgentID != "a1" {
		t.Fatalf("task.ready %+v", ev)
	}
	tc := ev.TaskContext(nil)
	cat, err := r.c.Catalog(ctx, ev.AgentID, ev.TurnID, tc)
	if err != nil || !strings.Contains(string(cat.Tools), workflowtask.SubmitResultName) {
		t.Fatalf("task catalog %s: %v", cat.Tools, err)
	}
	step := func(n int64, out ...json.RawMessage) *protocol.StepDone {
		t.Helper()
		run, err := r.c.Send(ctx, protocol.Step{AgentID: ev.AgentID, TurnID: ev.TurnID, Step: n, Context: tc, Output: out})
		if err != nil {
			t.Fatal(err)
		}
		defer run.Close()
		d, err := run.Wait(ctx)
		if err != nil || d.Task == nil {
			t.Fatalf("step %d: %+v, %v", n, d, err)
		}
		return d
	}
	d := step(0, json.RawMessage(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Thinking."}]}`))
	if d.Task.Status != protocol.VerdictRepair || d.Task.Instruction == "" || d.EndTurn {
		t.Fatalf("prose step: %+v", d.Task)
	}
	d = step(1, fc("r1", workflowtask.SubmitResultName, `{"result":{"answer":42}}`))
	if d.Task.Status != protocol.VerdictRejected || d.EndTurn {
		t.Fatalf("bad submission: %+v", d.Task)
	}
	d = step(2, fc("r2", workflowtask.SubmitResultName, `{"result":{"answer":"42"}}`))
	if d.Task.Status != protocol.VerdictAccepted || !d.EndTurn || string(d.Task.Result) != `{"answer":"42"}` {
		t.Fatalf("good submission: %+v %s", d.Task, d.Task.Result)
	}
}

func TestScheduleFires(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	ctx := ctxT(t)
	at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	bind := protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{schedules.Binding: true}}
	r.callOK(t, ctx, "t6", bind, fc("c1", schedules.CreateName, fmt.Sprintf(`{"instructions":"Water the plants.","at":%q}`, at)))
	fired := make(chan *protocol.ScheduleFire, 1)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() {
		errc <- r.c.ScheduleFires(cctx, "gw", func(_ context.Context, f *protocol.ScheduleFire) error {
			fired <- f
			return nil
		})
	}()
	select {
	case f := <-fired:
		if f.AgentID != "a1" || f.Instructions != "Water the plants." || f.Kind != "at" || f.Scheduler == "" || f.Next != "purge" ||
			f.CreatedBy.TurnID != "t6" || !protocol.ValidID(f.TurnID()) {
			t.Fatalf("fire %+v (turn id %q)", f, f.TurnID())
		}
	case <-ctx.Done():
		t.Fatal("the schedule never fired")
	}
	stop()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("ScheduleFires returned %v, want context.Canceled", err)
	}
}

func TestJobRunner(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	ctx := ctxT(t)
	bind := protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{backgroundjobs.Binding: true}}
	r.callOK(t, ctx, "t7", bind, fc("c1", backgroundjobs.StartName, `{"title":"Report","instructions":"Write it."}`))
	started := make(chan *protocol.JobEvent, 1)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = r.c.JobEvents(cctx, "runner", func(_ context.Context, ev *protocol.JobEvent) error {
			started <- ev
			return nil
		})
	}()
	var ev *protocol.JobEvent
	select {
	case ev = <-started:
	case <-ctx.Done():
		t.Fatal("no job.start")
	}
	if ev.Type != protocol.EventJobStart || ev.Title != "Report" || ev.Instructions != "Write it." || ev.TurnID != "t7" {
		t.Fatalf("job event %+v", ev)
	}
	if err := r.c.ReportJob(ctx, "a1", ev.JobID, protocol.JobReport{Status: protocol.JobSucceeded, Seq: 1, Result: "done: 3 pages"}); err != nil {
		t.Fatal(err)
	}
	// The worker applies the report; show_job then tells the model.
	for n := int64(1); ; n++ {
		run, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t7", Step: n, Context: bind,
			Output: []json.RawMessage{fc("s", backgroundjobs.ShowName, fmt.Sprintf(`{"job_id":%q}`, ev.JobID))}})
		if err != nil {
			t.Fatal(err)
		}
		outs, _, _ := drain(t, ctx, run)
		run.Close()
		if strings.Contains(string(outs["s"].Item), "done: 3 pages") {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the report never reached the job: %s", outs["s"].Item)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A step is published with its message id, the trace context of ctx and
// the body Send was given, on the subject its kind says.
func TestSendPublishesIdAndTraceContext(t *testing.T) {
	t.Parallel() // its own server
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	// The streams as the worker makes them, without a worker to take the
	// step off the work queue.
	for name, subj := range map[string]string{protocol.StreamCalls: "turn.call.*.*", protocol.StreamTasks: "turn.task.*.*", protocol.StreamOutputs: "turn.call.output.*.*"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subj}}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := gateway.New(nc, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sctx := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	item := json.RawMessage(`{"type":"function_call","call_id":"c1","name":"ping","arguments":"{}"}`)
	for _, s := range []protocol.Step{
		{AgentID: "a1", TurnID: "t1", Step: 4, Context: diagCtx, Output: []json.RawMessage{item}},
		{AgentID: "a1", TurnID: "t2", Step: 0, Context: protocol.Context{Kind: protocol.KindWorkflowTask, WorkflowID: "wf", TaskID: "q"}},
	} {
		run, err := c.Send(sctx, s)
		if err != nil {
			t.Fatal(err)
		}
		run.Close()
		stream, prefix := protocol.StreamCalls, protocol.PrefixCall
		if s.Context.Kind == protocol.KindWorkflowTask {
			stream, prefix = protocol.StreamTasks, protocol.PrefixTask
		}
		subject := protocol.Subject(prefix, s.AgentID, s.TurnID)
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		if got, want := m.Header.Get(jetstream.MsgIDHeader), protocol.StepMsgID(s.AgentID, s.TurnID, s.Step); got != want {
			t.Errorf("Nats-Msg-Id %q, want %q", got, want)
		}
		if got := m.Header.Get("traceparent"); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
			t.Errorf("traceparent %q", got)
		}
		parsed, err := protocol.ParseStep(prefix, subject, m.Data, 0)
		if err != nil || parsed.Step != s.Step || parsed.Context.Kind != s.Context.Kind {
			t.Fatalf("the worker's parser reads %s as %+v, %v", m.Data, parsed, err)
		}
		if len(s.Output) > 0 && !strings.Contains(string(m.Data), string(item)) {
			t.Errorf("the item is not in the step as sent: %s", m.Data)
		}
	}
}

// Replies that are not the workers' catalog are errors, not catalogs: a
// digest that is not that of the tools, and a body that is not JSON.
func TestCatalogReplyIsChecked(t *testing.T) {
	t.Parallel() // its own server
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	replies := []string{`{"tools":[{"type":"function","name":"x"}],"digest":"0000"}`, `not json`}
	i := 0
	sub, err := srv.Connect(t).Subscribe(protocol.SubjectTools, func(m *nats.Msg) {
		_ = m.Respond([]byte(replies[i%len(replies)]))
		i++
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c, err := gateway.New(nc, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range replies {
		if cat, err := c.Catalog(ctxT(t), "a1", "t1", diagCtx); err == nil {
			t.Fatalf("a bad reply gave the catalog %+v", cat)
		}
	}
}

// Progress events come on the activity subject while a call runs (from
// tools that report progress): the run returns them with their progress,
// skips other calls', and reports a malformed one as an error.
func TestProgressActivity(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	ctx := ctxT(t)
	run, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t8", Step: 0, Context: diagCtx,
		Output: []json.RawMessage{fc("c1", "sleep", `{"ms":60000}`)}}, gateway.WithActivity())
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	next := func() (protocol.Event, error) {
		t.Helper()
		for {
			ev, err := run.Next(ctx)
			if a, ok := ev.(*protocol.Activity); ok && a.State == protocol.ActivityStarted {
				continue
			}
			return ev, err
		}
	}
	subject := protocol.Subject(protocol.PrefixActive, "a1", "t8")
	for _, body := range []string{
		`{"call_id":"other","name":"sleep","state":"progress","label":"not ours","progress":{"done":1}}`,
		`{"call_id":"c1","name":"sleep","state":"progress","label":"Waiting","progress":{"done":3,"total":10}}`,
		`{"call_id":"c1","state":"exploded"}`,
	} {
		if err := r.nc.Publish(subject, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	ev, err := next()
	a, ok := ev.(*protocol.Activity)
	if err != nil || !ok || a.CallID != "c1" || a.State != protocol.ActivityProgress || a.Progress == nil || a.Progress.Done != 3 || *a.Progress.Total != 10 {
		t.Fatalf("event %T %+v, %v: want c1's progress", ev, ev, err)
	}
	var bad *gateway.EventError
	if _, err := next(); !errors.As(err, &bad) {
		t.Fatalf("a malformed activity gave %v", err)
	}
	if err := r.c.Cancel(ctx, "a1", "t8", ""); err != nil {
		t.Fatal(err)
	}
	if d, err := run.Wait(ctx); err != nil || !d.EndTurn {
		t.Fatalf("Wait after the cancel: %+v, %v", d, err)
	}
}

// A durable consumer started before any worker waits for the stream; a
// malformed message is terminated without reaching the handler, a failed
// or panicking handler gets its message again, and the rest flows on.
func TestDurableConsumerSettlesMessages(t *testing.T) {
	t.Parallel() // its own server
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := gateway.New(nc, gateway.Options{Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	type seen struct {
		task string
		n    int
	}
	got := make(chan seen, 16)
	calls := map[string]int{}
	errc := make(chan error, 1)
	go func() {
		errc <- c.WorkflowEvents(cctx, "gw", func(_ context.Context, ev *protocol.WorkflowEvent) error {
			calls[ev.TaskID]++
			got <- seen{ev.TaskID, calls[ev.TaskID]}
			switch {
			case ev.TaskID == "fails" && calls[ev.TaskID] == 1:
				return errors.New("not now")
			case ev.TaskID == "panics" && calls[ev.TaskID] == 1:
				panic("handler bug")
			}
			return nil
		})
	}()
	// The worker's stream, made after the consumer began waiting for it.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: protocol.StreamWorkflows, Subjects: []string{protocol.PrefixWFEvt + ".*"}}); err != nil {
		t.Fatal(err)
	}
	ready := func(task string) string {
		return fmt.Sprintf(`{"type":"task.ready","workflow_id":"wf_1","agent_id":"a1","turn_id":"task_wf_1_%s","task_id":%q,"instructions":"Go.","time":"2026-05-01T10:00:00Z"}`, task, task)
	}
	for _, body := range []string{`{"type":"task.ready","workflow_id":"wf_2"}`, ready("fails"), ready("panics"), `not json`, ready("ok")} {
		if _, err := js.Publish(ctx, "workflow.event.wf_1", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{"fails": 2, "panics": 2, "ok": 1}
	have := map[string]int{}
	for !reflect.DeepEqual(have, want) {
		select {
		case s := <-got:
			if s.n > want[s.task] {
				t.Fatalf("%s handled %d times", s.task, s.n)
			}
			have[s.task] = s.n
		case <-ctx.Done():
			t.Fatalf("handled %v, want %v", have, want)
		}
	}
	cons, err := js.Consumer(ctx, protocol.StreamWorkflows, "gw")
	if err != nil {
		t.Fatal(err)
	}
	// Everything settled: acknowledged or terminated, nothing pending.
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending == 0 && info.NumPending == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("consumer still has %d unacknowledged, %d pending", info.NumAckPending, info.NumPending)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("WorkflowEvents returned %v", err)
	}
}

// A closed run leaves no consumer on the server. Each Send reads the turn
// through two ordered consumers; when Close only stopped them, they
// stayed for the library's five idle minutes, and a door or gateway
// sending a few thousand steps in that time met the streams' consumer
// limit, after which every Send failed.
func TestClosedRunsLeaveNoConsumers(t *testing.T) {
	r := newRig(t)
	ctx := ctxT(t)
	count := func(stream string) int {
		s, err := r.js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	before := count(protocol.StreamOutputs) + count(protocol.StreamDead)
	for i := range 20 {
		r.callOK(t, ctx, fmt.Sprintf("leak%d", i), diagCtx, fc("c1", "ping", `{"note":"x"}`))
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		n := count(protocol.StreamOutputs) + count(protocol.StreamDead)
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d consumers left on TURN_OUTPUTS and TURN_DEAD after 20 closed runs (%d before)", n, before)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
