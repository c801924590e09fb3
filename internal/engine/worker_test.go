package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// orderLog records when probe tools start and end.
type orderLog struct {
	mu     sync.Mutex
	events []string
}

func (l *orderLog) add(s string) {
	l.mu.Lock()
	l.events = append(l.events, s)
	l.mu.Unlock()
}

func (l *orderLog) index(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Index(l.events, s)
}

type probeParams struct {
	Label string `json:"label"`
	MS    int    `json:"ms,omitempty" jsonschema:"minimum=0,maximum=20000"`
}

// probeCategory offers par (parallel, read-only) and seq (sequential)
// tools that log their start and end.
func probeCategory(log *orderLog, runs *counter) tool.Category {
	mk := func(name string, mode tool.Mode, ro bool) *tool.Tool {
		return tool.Must(tool.Def[probeParams]{
			Spec:     tool.Spec{Name: name, Description: "probe " + name, ExecutionMode: mode, ReadOnly: ro},
			Activity: func(p probeParams) string { return name + " " + p.Label },
			Execute: func(ctx context.Context, p probeParams) (tool.Result, error) {
				runs.add(p.Label)
				log.add("start:" + p.Label)
				defer log.add("end:" + p.Label)
				select {
				case <-time.After(time.Duration(p.MS) * time.Millisecond):
				case <-ctx.Done():
					return tool.Result{}, context.Cause(ctx)
				}
				return tool.Result{Content: name + " " + p.Label + " done", Details: map[string]string{"label": p.Label}}, nil
			},
		})
	}
	ts := []*tool.Tool{mk("par", tool.Parallel, true), mk("seq", tool.Sequential, false)}
	return tool.Category{Name: "test", Tools: func(context.Context, tool.Turn) ([]*tool.Tool, error) { return ts, nil }}
}

func TestStepMixedParallelAndSequential(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	var log orderLog
	var runs counter
	startWorker(t, s, testConfig(), probeCategory(&log, &runs), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	ev := g.watch("a1", "t1")
	g.sendStep("a1", "t1", 0,
		fc("c1", "par", `{"label":"p1","ms":50}`),
		fc("c2", "par", `{"label":"p2","ms":10}`),
		fc("c3", "seq", "```json\n{\"label\":\"s1\",\"ms\":10}\n```"),
		fc("c4", "par", `{"label":"p3","ms":1}`),
		fc("c5", "nope", `{}`),
		fc("c6", "par", `{"label":"p4","ms":-1}`),
	)
	outputs, done := ev.untilDone()
	if len(outputs) != 6 || len(done.Items) != 6 {
		t.Fatalf("got %d outputs and %d items, want 6 each", len(outputs), len(done.Items))
	}
	for i, want := range []string{"c1", "c2", "c3", "c4", "c5", "c6"} {
		if id, _ := itemOutput(t, done.Items[i]); id != want {
			t.Errorf("items[%d] is %s, want %s (call order)", i, id, want)
		}
	}
	if done.EndTurn {
		t.Error("end_turn set for a step whose tools did not ask for it")
	}
	wantStatus := map[string]string{"c1": "ok", "c2": "ok", "c3": "ok", "c4": "ok", "c5": "error", "c6": "error"}
	for id, st := range wantStatus {
		if outputs[id].Status != st {
			t.Errorf("%s status %s, want %s (%s)", id, outputs[id].Status, st, outputs[id].Raw)
		}
	}
	if k := outputs["c5"].Error.Kind; k != "unknown_tool" {
		t.Errorf("c5 kind %s, want unknown_tool", k)
	}
	if k := outputs["c6"].Error.Kind; k != "invalid_arguments" {
		t.Errorf("c6 kind %s, want invalid_arguments", k)
	}
	if _, out := itemOutput(t, outputs["c6"].Item); !strings.Contains(out, "/ms") {
		t.Errorf("invalid_arguments output does not point at /ms: %s", out)
	}
	if r := outputs["c3"].Repairs; len(r) != 1 || r[0] != "strip_fences" {
		t.Errorf("c3 repairs %v, want [strip_fences]", r)
	}
	// The sequential call started after both earlier calls ended, and the
	// later call started after it ended.
	s1 := log.index("start:s1")
	if s1 < log.index("end:p1") || s1 < log.index("end:p2") || log.index("start:p3") < log.index("end:s1") {
		t.Errorf("order violated: %v", log.events)
	}
	if hdr := done.Header.Get(jetstream.MsgIDHeader); hdr != "a1.t1.0.done" {
		t.Errorf("step.done msg id %q", hdr)
	}
	if hdr := outputs["c1"].Header.Get(jetstream.MsgIDHeader); hdr != "a1.t1.0.c1" {
		t.Errorf("call.output msg id %q", hdr)
	}
}

// A call that runs for several ack waits keeps its step's lease: the step
// is not delivered again while it runs.
//
// The lease is renewed every third of the ack wait, so what a renewal may
// be late by before the server redelivers is two thirds of it: with a
// 1–2 s ack wait that is under 1.4 s, which a timer or the step's handling
// on a loaded 2-core machine under -race can exceed (a redelivery, and the
// test fails). With 4 s, a renewal may be 2.7 s late; the call outlives
// two and a half ack waits. It mostly sleeps, beside the other tests.
func TestLongCallKeepsItsLease(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	var log orderLog
	var runs counter
	cfg := testConfig()
	cfg.Topology.AckWait = 4 * time.Second
	startWorker(t, s, cfg, probeCategory(&log, &runs))
	g := newGateway(t, s)
	ev := g.watch("a1", "t1")
	g.sendStep("a1", "t1", 0, fc("c1", "par", `{"label":"long","ms":10000}`))
	outputs, _ := ev.untilDone()
	if outputs["c1"].Status != "ok" {
		t.Fatalf("c1: %s", outputs["c1"].Raw)
	}
	ev.quiet(1500 * time.Millisecond)
	if n := runs.get("long"); n != 1 {
		t.Errorf("the call ran %d times: its step was delivered again while it ran", n)
	}
	info, err := must(g.js.Consumer(context.Background(), protocol.StreamCalls, protocol.ConsumerCalls)).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 || info.NumAckPending != 0 {
		t.Errorf("consumer: %d redelivered, %d pending acks", info.NumRedelivered, info.NumAckPending)
	}
}

// A call whose id is "done" still gets both events: its call.output's
// message id must not be step.done's, or step.done would be dropped as a
// duplicate.
func TestCallIDDone(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	var log orderLog
	var runs counter
	startWorker(t, s, testConfig(), probeCategory(&log, &runs))
	g := newGateway(t, s)
	ev := g.watch("a1", "t1")
	g.sendStep("a1", "t1", 0, fc("done", "par", `{"label":"d","ms":1}`))
	outputs, done := ev.untilDone()
	if outputs["done"].Status != "ok" || len(done.Items) != 1 {
		t.Fatalf("outputs %v, step.done %s", outputs, done.Raw)
	}
	if id := outputs["done"].Header.Get(jetstream.MsgIDHeader); id != "a1.t1.0.~done" {
		t.Errorf("call.output msg id %q", id)
	}
}

func TestEmptyStepEndsTurn(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig())
	g := newGateway(t, s)
	ev := g.watch("a1", "t2")
	g.sendStep("a1", "t2", 3)
	outputs, done := ev.untilDone()
	if len(outputs) != 0 || len(done.Items) != 0 || !done.EndTurn || done.Step != 3 {
		t.Fatalf("outputs %d, done %s", len(outputs), done.Raw)
	}
}

func TestCatalogRequests(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	nc := s.Connect(t)
	ask := func(body string) *nats.Msg {
		m, err := nc.Request(protocol.SubjectTools, []byte(body), 5*time.Second)
		if err != nil {
			t.Fatalf("request %s: %v", body, err)
		}
		return m
	}
	var withDiag, without protocol.CatalogReply
	must(0, json.Unmarshal(ask(`{"agent_id":"a","turn_id":"t","context":{"kind":"text","bindings":{"diagnostics":true}}}`).Data, &withDiag))
	must(0, json.Unmarshal(ask(`{"agent_id":"a","turn_id":"t","context":{"kind":"text"}}`).Data, &without))
	var defs []struct{ Name string }
	must(0, json.Unmarshal(withDiag.Tools, &defs))
	if len(defs) != 3 || defs[0].Name != "ping" {
		t.Errorf("diagnostics catalog %s", withDiag.Tools)
	}
	if string(without.Tools) != "[]" {
		t.Errorf("unbound catalog %s, want []", without.Tools)
	}
	var again protocol.CatalogReply
	must(0, json.Unmarshal(ask(`{"agent_id":"b","turn_id":"u","context":{"kind":"text","bindings":{"diagnostics":true}}}`).Data, &again))
	if again.Digest != withDiag.Digest || string(again.Tools) != string(withDiag.Tools) {
		t.Error("same context gave a different catalog")
	}
	for _, bad := range []string{`not json`, `{"agent_id":"a b","turn_id":"t","context":{"kind":"text"}}`, `{"agent_id":"a","turn_id":"t","context":{"kind":"chat"}}`} {
		m := ask(bad)
		if code := m.Header.Get("Nats-Service-Error-Code"); code != "400" {
			t.Errorf("%s: error code %q, want 400 (%s)", bad, code, m.Header.Get("Nats-Service-Error"))
		}
	}
}

func TestCancelMidCall(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	var log orderLog
	var runs counter
	startWorker(t, s, testConfig(), probeCategory(&log, &runs), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	started := make(chan *nats.Msg, 10)
	sub := must(g.nc.ChanSubscribe(protocol.Subject(protocol.PrefixActive, "a1", "tc"), started))
	defer sub.Unsubscribe()
	ev := g.watch("a1", "tc")
	g.sendStep("a1", "tc", 0, fc("c1", "sleep", `{"ms":60000}`), fc("c2", "seq", `{"label":"after"}`))
	select {
	case m := <-started:
		var a protocol.Activity
		must(0, json.Unmarshal(m.Data, &a))
		if a.State != "started" || a.CallID != "c1" || a.Label != "Waiting 60000 ms" {
			t.Fatalf("activity %s", m.Data)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call never started")
	}
	if err := g.nc.Publish(protocol.Subject(protocol.PrefixCancel, "a1", "tc"), []byte(`{"reason":"user pressed stop"}`)); err != nil {
		t.Fatal(err)
	}
	outputs, done := ev.untilDone()
	for _, id := range []string{"c1", "c2"} {
		if o := outputs[id]; o.Error == nil || o.Error.Kind != "aborted" {
			t.Errorf("%s: %s, want aborted", id, o.Raw)
		}
	}
	if !strings.Contains(outputs["c1"].Error.Message, "user pressed stop") {
		t.Errorf("abort message does not carry the reason: %s", outputs["c1"].Error.Message)
	}
	if !done.EndTurn || len(done.Items) != 2 {
		t.Errorf("step.done %s", done.Raw)
	}
	if runs.get("after") != 0 {
		t.Error("a call after the cancel ran")
	}
	// A later step of the cancelled turn runs nothing.
	g.sendStep("a1", "tc", 1, fc("c3", "seq", `{"label":"late"}`))
	outputs, done = ev.untilDone()
	if o := outputs["c3"]; o.Error == nil || o.Error.Kind != "aborted" || !done.EndTurn {
		t.Errorf("late step: %s / %s", o.Raw, done.Raw)
	}
	if runs.get("late") != 0 {
		t.Error("a step of a cancelled turn ran a tool")
	}
}

func TestBadMessagesAreDeadLettered(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	cfg := testConfig()
	cfg.MaxStepBytes = 4096
	startWorker(t, s, cfg, diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	dead := g.watchSubject(protocol.StreamDead, protocol.PrefixDead+".>")
	big := step("a", "big", 0, fc("c1", "ping", `{"note":"`+strings.Repeat("x", 5000)+`"}`))
	cases := []struct {
		name, subject string
		body          any
		reason        string
	}{
		{"not json", "turn.call.a.t1", "this is not json", "not a JSON step object"},
		{"bad agent id", "turn.call.a.t2", `{"agent_id":"a!","turn_id":"t2","step":0,"context":{"kind":"text"},"output":[]}`, "agent_id"},
		{"subject mismatch", "turn.call.a.t3", `{"agent_id":"a","turn_id":"other","step":0,"context":{"kind":"text"},"output":[]}`, "disagree with subject"},
		{"over the size limit", "turn.call.a.big", big, "over the 4096 byte limit"},
		{"step of the wrong type", "turn.call.a.t4", `{"agent_id":"a","turn_id":"t4","step":"zero","context":{"kind":"text"},"output":[]}`, "not a JSON step object"},
		{"negative step", "turn.call.a.t5", `{"agent_id":"a","turn_id":"t5","step":-1,"context":{"kind":"text"},"output":[]}`, "negative"},
		{"missing context", "turn.call.a.t6", `{"agent_id":"a","turn_id":"t6","step":0,"output":[]}`, "context is missing"},
		{"arguments not a string", "turn.call.a.t7", `{"agent_id":"a","turn_id":"t7","step":0,"context":{"kind":"text"},"output":[{"type":"function_call","call_id":"c","name":"ping","arguments":{}}]}`, "arguments is not a string"},
		{"task turn on the call stream", "turn.call.a.t8", `{"agent_id":"a","turn_id":"t8","step":0,"context":{"kind":"workflow_task"},"output":[]}`, "task turns go to"},
		{"duplicate call ids", "turn.call.a.t9", `{"agent_id":"a","turn_id":"t9","step":0,"context":{"kind":"text"},"output":[{"type":"function_call","call_id":"c","name":"ping","arguments":"{}"},{"type":"function_call","call_id":"c","name":"ping","arguments":"{}"}]}`, "appears twice"},
	}
	for _, c := range cases {
		g.publish(c.subject, "", c.body)
	}
	got := map[string]event{}
	for range cases {
		e := dead.next()
		got[e.Header.Get(protocol.HeaderDeadSubject)] = e
	}
	for _, c := range cases {
		e, ok := got[c.subject]
		if !ok {
			t.Errorf("%s: not dead-lettered", c.name)
			continue
		}
		if r := e.Header.Get(protocol.HeaderDeadReason); !strings.Contains(r, c.reason) {
			t.Errorf("%s: reason %q does not mention %q", c.name, r, c.reason)
		}
		if e.Header.Get(protocol.HeaderDeadStreamSeq) == "" {
			t.Errorf("%s: no %s header", c.name, protocol.HeaderDeadStreamSeq)
		}
	}
	// Nothing is left in the work queue.
	waitFor(t, func() bool {
		info := must(must(g.js.Stream(context.Background(), protocol.StreamCalls)).Info(context.Background()))
		return info.State.Msgs == 0
	}, "the work queue to empty")
}

func TestDeliveryLimitDeadLetters(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	cfg := testConfig()
	cfg.Topology.MaxDeliver = 2
	failing := tool.Category{Name: "failing", Tools: func(_ context.Context, t tool.Turn) ([]*tool.Tool, error) {
		if t.Bound("explode") {
			return nil, errors.New("this category cannot be built")
		}
		return nil, nil
	}}
	startWorker(t, s, cfg, failing)
	g := newGateway(t, s)
	dead := g.watchSubject(protocol.StreamDead, protocol.PrefixDead+".>")
	body := `{"agent_id":"a","turn_id":"boom","step":0,"context":{"kind":"text","bindings":{"explode":true}},"output":[]}`
	g.publish("turn.call.a.boom", "a.boom.0", body)
	e := dead.next()
	if r := e.Header.Get(protocol.HeaderDeadReason); !strings.Contains(r, "delivery limit reached: delivered 2 times") {
		t.Errorf("reason %q", r)
	}
	if string(e.Raw) != body {
		t.Errorf("dead letter body %s", e.Raw)
	}
	waitFor(t, func() bool {
		info := must(must(g.js.Stream(context.Background(), protocol.StreamCalls)).Info(context.Background()))
		return info.State.Msgs == 0
	}, "the step to leave the work queue")
}

func TestGracefulStopLetsRunningCallsFinish(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	var log orderLog
	var runs counter
	nc := s.Connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	w := must(newWorker(ctx, nc, probeCategory(&log, &runs)))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	workertest.WaitForService(t, nc)
	g := newGateway(t, s)
	ev := g.watch("a1", "tg")
	g.sendStep("a1", "tg", 0, fc("c1", "par", `{"label":"slow","ms":700}`))
	waitFor(t, func() bool { return log.index("start:slow") >= 0 }, "the call to start")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	outputs, d := ev.untilDone()
	if outputs["c1"].Status != "ok" || d.EndTurn {
		t.Errorf("the running call did not finish normally: %s", outputs["c1"].Raw)
	}
	// The ack left before Run returned; the server applies it at once.
	waitFor(t, func() bool {
		info := must(must(g.js.Stream(context.Background(), protocol.StreamCalls)).Info(context.Background()))
		return info.State.Msgs == 0
	}, "the acked step to leave the work queue")
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestIncompatibleStreamStopsTheStart(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: protocol.StreamCalls, Subjects: []string{"turn.call.*.*"}, Retention: jetstream.LimitsPolicy}); err != nil {
		t.Fatal(err)
	}
	_, err := newWorker(ctx, s.Connect(t))
	if err == nil || !errors.Is(err, bus.ErrIncompatible) || !strings.Contains(err.Error(), "retention is Limits, the worker needs WorkQueue") {
		t.Fatalf("worker.New: %v, want an incompatible-retention error", err)
	}
}

// A worker given Interest asks it before each activity event and sends
// the event only to a turn someone watches: a step of an unwatched turn
// sends none, a watched one the call's started and completed events.
func TestActivityOnlyWhenWatched(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	var log orderLog
	var runs, asked, refused counter
	cfg := testConfig()
	cfg.Interest = func(subject string) bool {
		ok := s.GlobalAccount().SubscriptionInterest(subject)
		asked.add(subject)
		if !ok {
			refused.add(subject)
		}
		return ok
	}
	startWorker(t, s, cfg, probeCategory(&log, &runs))
	g := newGateway(t, s)

	ev := g.watch("a1", "unwatched")
	g.sendStep("a1", "unwatched", 0, fc("c1", "seq", `{"label":"one"}`))
	ev.untilDone()
	quiet := protocol.Subject(protocol.PrefixActive, "a1", "unwatched")
	if n := asked.get(quiet); n < 2 || refused.get(quiet) != n {
		t.Errorf("unwatched turn: asked %d times, refused %d, want at least 2, all refused", n, refused.get(quiet))
	}

	watched := protocol.Subject(protocol.PrefixActive, "a1", "watched")
	got := make(chan *nats.Msg, 10)
	sub := must(g.nc.ChanSubscribe(watched, got))
	defer sub.Unsubscribe()
	must(0, g.nc.Flush())
	ev = g.watch("a1", "watched")
	g.sendStep("a1", "watched", 0, fc("c2", "seq", `{"label":"two"}`))
	ev.untilDone()
	var states []string
	for len(states) < 2 {
		select {
		case m := <-got:
			var a protocol.Activity
			must(0, json.Unmarshal(m.Data, &a))
			if a.CallID != "c2" || a.Label != "seq two" {
				t.Errorf("activity %s", m.Data)
			}
			states = append(states, a.State)
		case <-time.After(20 * time.Second):
			t.Fatalf("watched turn: activities %v, want started and completed", states)
		}
	}
	if !slices.Equal(states, []string{"started", "completed"}) {
		t.Errorf("watched turn: activities %v, want started and completed", states)
	}
	if refused.get(watched) != 0 {
		t.Errorf("watched turn: %d activities refused", refused.get(watched))
	}
}
