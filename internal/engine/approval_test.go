package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// approvalRig is a worker whose diagnostics mark tool (not read-only: each
// run appends a line) needs approval, and a gateway.
type approvalRig struct {
	t       *testing.T
	s       *natstest.Server
	g       *gateway
	markDir string
}

func newApprovalRig(t *testing.T, policy turn.Policy) *approvalRig {
	t.Helper()
	s := natstest.Start(t)
	r := &approvalRig{t: t, s: s, markDir: t.TempDir()}
	cfg := testConfig()
	cfg.Approval = policy
	startWorker(t, s, cfg, diagnostics.Category(diagnostics.Config{MarkDir: r.markDir}))
	r.g = newGateway(t, s)
	return r
}

// marks are the labels mark appended, in order.
func (r *approvalRig) marks() []string {
	b, err := os.ReadFile(filepath.Join(r.markDir, "marks.log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// pending reads the next event, which must be the step's step.pending.
func pendingEvent(t *testing.T, ev *events, agent, turnID string, n int64) protocol.StepPending {
	t.Helper()
	e := ev.next()
	if e.Type != protocol.EventStepPending {
		t.Fatalf("got %s, want step.pending", e.Raw)
	}
	if id := e.Header.Get("Nats-Msg-Id"); id != protocol.StepPendingMsgID(agent, turnID, n) {
		t.Errorf("step.pending has message id %q", id)
	}
	var p protocol.StepPending
	if err := json.Unmarshal(e.Raw, &p); err != nil {
		t.Fatal(err)
	}
	if p.Step != n || p.AgentID != agent || p.TurnID != turnID || p.ExpiresAt.IsZero() {
		t.Errorf("step.pending %s", e.Raw)
	}
	return p
}

func (r *approvalRig) answer(agent, turnID string, n int64, msgID string, decisions ...protocol.Decision) {
	r.g.publish(protocol.Subject(protocol.PrefixApproval, agent, turnID), msgID,
		protocol.Approval{AgentID: agent, TurnID: turnID, Step: n, Decisions: decisions})
}

func errKind(e event) string {
	if e.Error == nil {
		return ""
	}
	return e.Error.Kind
}

func TestApprovalApproveRunsTheShownArgumentsOnce(t *testing.T) {
	t.Parallel()
	r := newApprovalRig(t, turn.Policy{Names: []string{"mark"}})
	ev := r.g.watch("a1", "t1")
	// The mark's arguments need a repair (a trailing comma): what is shown,
	// and what runs, is the repaired value.
	r.g.sendStep("a1", "t1", 0, fc("c1", "ping", `{"note":"x"}`), fc("c2", "mark", `{"label":"approved",}`), fc("c3", "mark", `{"label":5}`))
	p := pendingEvent(t, ev, "a1", "t1", 0)
	if len(p.Approvals) != 1 || p.Approvals[0].CallID != "c2" || p.Approvals[0].Name != "mark" || p.Approvals[0].Reason != "named" ||
		string(p.Approvals[0].Arguments) != `{"label":"approved"}` || p.Approvals[0].Activity != "Marking approved" {
		t.Fatalf("approvals %+v", p.Approvals)
	}
	if d := time.Until(p.ExpiresAt); d < 23*time.Hour || d > 25*time.Hour {
		t.Errorf("expires_at %s is not about 24h away", p.ExpiresAt)
	}
	// Nothing ran, not even the call that needs no approval.
	ev.quiet(300 * time.Millisecond)
	if m := r.marks(); len(m) != 0 {
		t.Fatalf("marks before the approval: %v", m)
	}
	// The step's timer waits in TURN_APPROVALS, scheduled at expires_at.
	stream, err := r.g.js.Stream(context.Background(), protocol.StreamApprovals)
	if err != nil {
		t.Fatal(err)
	}
	timer, err := stream.GetLastMsgForSubject(context.Background(), protocol.ApprovalTimerSubject("a1", "t1", 0))
	if err != nil || timer.Header.Get("Nats-Schedule") != "@at "+p.ExpiresAt.Format(time.RFC3339) ||
		timer.Header.Get("Nats-Schedule-Target") != protocol.ApprovalTimeoutSubject("a1", "t1", 0) {
		t.Fatalf("timer %+v, %v", timer, err)
	}
	r.answer("a1", "t1", 0, protocol.ApprovalMsgID("a1", "t1", 0, 1), protocol.Decision{CallID: "c2", Approved: true})
	outs, done := ev.untilDone()
	if outs["c1"].Status != "ok" || outs["c2"].Status != "ok" || errKind(outs["c3"]) != "invalid_arguments" {
		t.Fatalf("outputs %+v", outs)
	}
	if !slices.Equal(outs["c2"].Repairs, []string{"trailing_commas"}) {
		t.Errorf("c2 repairs %v: the repair that made the shown arguments is reported", outs["c2"].Repairs)
	}
	if len(done.Items) != 3 || done.EndTurn {
		t.Errorf("step.done %s", done.Raw)
	}
	for i, want := range []string{"c1", "c2", "c3"} {
		if id, _ := itemOutput(t, done.Items[i]); id != want {
			t.Errorf("item %d is %s, want %s", i, id, want)
		}
	}
	if m := r.marks(); !slices.Equal(m, []string{"approved"}) {
		t.Errorf("marks %v", m)
	}
	// The decided step's timer is gone: it will not fire.
	waitFor(t, func() bool {
		_, err := stream.GetLastMsgForSubject(context.Background(), protocol.ApprovalTimerSubject("a1", "t1", 0))
		return errors.Is(err, jetstream.ErrMsgNotFound)
	}, "the timer to be removed")
	// A second answer (a correction's id) is ignored: nothing runs again.
	r.answer("a1", "t1", 0, protocol.ApprovalMsgID("a1", "t1", 0, 2), protocol.Decision{CallID: "c2", Approved: true})
	ev.quiet(500 * time.Millisecond)
	if m := r.marks(); len(m) != 1 {
		t.Errorf("marks after a second answer %v", m)
	}
}

func TestApprovalRefused(t *testing.T) {
	t.Parallel()
	r := newApprovalRig(t, turn.Policy{Names: []string{"mark"}})
	ev := r.g.watch("a1", "t2")
	r.g.sendStep("a1", "t2", 0, fc("c1", "mark", `{"label":"no"}`), fc("c2", "ping", `{}`))
	pendingEvent(t, ev, "a1", "t2", 0)
	r.answer("a1", "t2", 0, protocol.ApprovalMsgID("a1", "t2", 0, 1), protocol.Decision{CallID: "c1", Approved: false, Reason: "not on main"})
	outs, _ := ev.untilDone()
	if errKind(outs["c1"]) != "rejected" || outs["c2"].Status != "ok" {
		t.Fatalf("outputs %+v", outs)
	}
	if _, text := itemOutput(t, outs["c1"].Item); !strings.Contains(text, "not on main") || !strings.Contains(text, "Error (rejected)") {
		t.Errorf("the model reads %q", text)
	}
	if m := r.marks(); len(m) != 0 {
		t.Errorf("a refused call ran: %v", m)
	}
}

func TestApprovalPartial(t *testing.T) {
	t.Parallel()
	r := newApprovalRig(t, turn.Policy{Names: []string{"mark"}})
	ev := r.g.watch("a1", "t3")
	r.g.sendStep("a1", "t3", 0, fc("c1", "mark", `{"label":"one"}`), fc("c2", "mark", `{"label":"two"}`))
	p := pendingEvent(t, ev, "a1", "t3", 0)
	if len(p.Approvals) != 2 {
		t.Fatalf("approvals %+v", p.Approvals)
	}
	// An answer that misses a pending call is dead-lettered; the step
	// stays pending, and the correction decides it.
	dead := r.g.watchSubject(protocol.StreamDead, protocol.Subject(protocol.PrefixDead, "a1", "t3"))
	r.answer("a1", "t3", 0, protocol.ApprovalMsgID("a1", "t3", 0, 1), protocol.Decision{CallID: "c1", Approved: true})
	if e := dead.next(); !strings.Contains(e.Header.Get(protocol.HeaderDeadReason), `no decision for the pending call(s) "c2"`) {
		t.Fatalf("dead letter reason %q", e.Header.Get(protocol.HeaderDeadReason))
	}
	ev.quiet(300 * time.Millisecond)
	r.answer("a1", "t3", 0, protocol.ApprovalMsgID("a1", "t3", 0, 2), protocol.Decision{CallID: "c2", Approved: false}, protocol.Decision{CallID: "c1", Approved: true})
	outs, _ := ev.untilDone()
	if outs["c1"].Status != "ok" || errKind(outs["c2"]) != "rejected" {
		t.Fatalf("outputs %+v", outs)
	}
	if m := r.marks(); !slices.Equal(m, []string{"one"}) {
		t.Errorf("marks %v", m)
	}
}

func TestApprovalTimesOut(t *testing.T) {
	t.Parallel()
	r := newApprovalRig(t, turn.Policy{Destructive: true, Names: []string{"mark"}, Timeout: 2 * time.Second})
	ev := r.g.watch("a1", "t4")
	r.g.sendStep("a1", "t4", 0, fc("c1", "mark", `{"label":"late"}`), fc("c2", "ping", `{}`))
	pendingEvent(t, ev, "a1", "t4", 0)
	outs, done := ev.untilDone()
	if errKind(outs["c1"]) != "rejected" || outs["c2"].Status != "ok" || len(done.Items) != 2 {
		t.Fatalf("outputs %+v", outs)
	}
	if _, text := itemOutput(t, outs["c1"].Item); !strings.Contains(text, protocol.ApprovalTimedOut) {
		t.Errorf("the model reads %q", text)
	}
	// An answer after the timeout is ignored.
	r.answer("a1", "t4", 0, protocol.ApprovalMsgID("a1", "t4", 0, 1), protocol.Decision{CallID: "c1", Approved: true})
	ev.quiet(500 * time.Millisecond)
	if m := r.marks(); len(m) != 0 {
		t.Errorf("marks %v", m)
	}
}

func TestApprovalCancelWhilePending(t *testing.T) {
	t.Parallel()
	r := newApprovalRig(t, turn.Policy{All: true})
	ev := r.g.watch("a1", "t5")
	r.g.sendStep("a1", "t5", 0, fc("c1", "mark", `{"label":"x"}`), fc("c2", "ping", `{}`))
	p := pendingEvent(t, ev, "a1", "t5", 0)
	if len(p.Approvals) != 2 || p.Approvals[1].Reason != "all" {
		t.Fatalf("approvals %+v", p.Approvals)
	}
	if err := r.g.nc.Publish(protocol.Subject(protocol.PrefixCancel, "a1", "t5"), []byte(`{"reason":"user left"}`)); err != nil {
		t.Fatal(err)
	}
	outs, done := ev.untilDone()
	if errKind(outs["c1"]) != "aborted" || errKind(outs["c2"]) != "aborted" || !done.EndTurn {
		t.Fatalf("outputs %+v, step.done %s", outs, done.Raw)
	}
	if _, text := itemOutput(t, outs["c1"].Item); !strings.Contains(text, "user left") {
		t.Errorf("the model reads %q", text)
	}
	// An answer for the cancelled turn's step is ignored.
	r.answer("a1", "t5", 0, protocol.ApprovalMsgID("a1", "t5", 0, 1), protocol.Decision{CallID: "c1", Approved: true}, protocol.Decision{CallID: "c2", Approved: true})
	ev.quiet(500 * time.Millisecond)
	if m := r.marks(); len(m) != 0 {
		t.Errorf("marks %v", m)
	}
}

func TestApprovalRedeliveredStepAndDecision(t *testing.T) {
	t.Parallel()
	r := newApprovalRig(t, turn.Policy{Names: []string{"mark"}})
	ev := r.g.watch("a1", "t6")
	r.g.sendStep("a1", "t6", 0, fc("c1", "mark", `{"label":"once"}`))
	pendingEvent(t, ev, "a1", "t6", 0)
	// The same step again (under another message id, as a redelivery
	// after the duplicate window would be): it republishes step.pending,
	// which the outputs stream drops as a duplicate, and runs nothing.
	r.g.publish(protocol.Subject(protocol.PrefixCall, "a1", "t6"), "again", step("a1", "t6", 0, fc("c1", "mark", `{"label":"once"}`)))
	ev.quiet(500 * time.Millisecond)
	// The decision twice, under two ids.
	r.answer("a1", "t6", 0, protocol.ApprovalMsgID("a1", "t6", 0, 1), protocol.Decision{CallID: "c1", Approved: true})
	r.answer("a1", "t6", 0, protocol.ApprovalMsgID("a1", "t6", 0, 3), protocol.Decision{CallID: "c1", Approved: true})
	outs, _ := ev.untilDone()
	if outs["c1"].Status != "ok" {
		t.Fatalf("outputs %+v", outs)
	}
	ev.quiet(500 * time.Millisecond)
	// And the step once more, after it completed: nothing runs.
	r.g.publish(protocol.Subject(protocol.PrefixCall, "a1", "t6"), "again-2", step("a1", "t6", 0, fc("c1", "mark", `{"label":"once"}`)))
	ev.quiet(500 * time.Millisecond)
	if m := r.marks(); !slices.Equal(m, []string{"once"}) {
		t.Errorf("marks %v", m)
	}
}

func TestApprovalMalformedAnswersAreDeadLettered(t *testing.T) {
	t.Parallel()
	r := newApprovalRig(t, turn.Policy{Names: []string{"mark"}})
	ev := r.g.watch("a1", "t7")
	dead := r.g.watchSubject(protocol.StreamDead, protocol.Subject(protocol.PrefixDead, "a1", "t7"))
	r.g.sendStep("a1", "t7", 0, fc("c1", "mark", `{"label":"x"}`), fc("c2", "mark", `{"label":"y"}`))
	pendingEvent(t, ev, "a1", "t7", 0)
	subject := protocol.Subject(protocol.PrefixApproval, "a1", "t7")
	for i, c := range []struct{ body, reason string }{
		{`{"agent_id":"a1","turn_id":"t7","step":0,"decisions":[{"call_id":"c1","approved":true}]}`, `no decision for the pending call(s) "c2"`},
		{`{"agent_id":"a1","turn_id":"t7","step":0,"decisions":[{"call_id":"c1","approved":true},{"call_id":"c2","approved":true},{"call_id":"c9","approved":true}]}`, `call "c9" is not pending approval`},
		{`{"agent_id":"a1","turn_id":"t7","step":4,"decisions":[{"call_id":"c1","approved":true},{"call_id":"c2","approved":true}]}`, `step 4 of turn a1.t7 is not pending approval`},
		{`not json`, `not a JSON approval object`},
		{`{"agent_id":"a1","turn_id":"t7","step":"0","decisions":[{"call_id":"c1","approved":true}]}`, `cannot unmarshal`},
		{`{"agent_id":"a1","turn_id":"t7","step":0,"decisions":[{"call_id":"c1","approved":"yes"},{"call_id":"c2","approved":true}]}`, `cannot unmarshal`},
		{`{"agent_id":"a1","turn_id":"t7","step":0,"decisions":[{"call_id":"c1"},{"call_id":"c2","approved":true}]}`, `approved (true or false) is missing`},
		{`{"agent_id":"a1","turn_id":"t8","step":0,"decisions":[{"call_id":"c1","approved":true}]}`, `disagree with subject`},
	} {
		r.g.publish(subject, protocol.ApprovalMsgID("a1", "t7", 0, i+1), c.body)
		e := dead.next()
		if got := e.Header.Get(protocol.HeaderDeadReason); !strings.Contains(got, c.reason) {
			t.Errorf("answer %d: dead-letter reason %q, want one saying %q", i+1, got, c.reason)
		}
		if string(e.Raw) != c.body {
			t.Errorf("answer %d: dead letter holds %q", i+1, e.Raw)
		}
	}
	ev.quiet(200 * time.Millisecond)
	if m := r.marks(); len(m) != 0 {
		t.Fatalf("marks %v", m)
	}
	// The step stayed pending: a correct answer decides it.
	r.answer("a1", "t7", 0, protocol.ApprovalMsgID("a1", "t7", 0, 9), protocol.Decision{CallID: "c1", Approved: true}, protocol.Decision{CallID: "c2", Approved: true})
	outs, _ := ev.untilDone()
	if outs["c1"].Status != "ok" || outs["c2"].Status != "ok" {
		t.Fatalf("outputs %+v", outs)
	}
	if m := r.marks(); !slices.Equal(m, []string{"x", "y"}) {
		t.Errorf("marks %v", m)
	}
}

func TestApprovalContextAddsAndCatalogLists(t *testing.T) {
	t.Parallel()
	// The worker holds nothing back; a context names mark.
	r := newApprovalRig(t, turn.Policy{})
	for _, c := range []struct {
		scope protocol.ApprovalScope
		want  []string
	}{
		{protocol.ApprovalScope{}, nil},
		{protocol.ApprovalScope{Names: []string{"mark"}}, []string{"mark"}},
		{protocol.ApprovalScope{Level: protocol.ApprovalDestructive}, nil},
		{protocol.ApprovalScope{Level: protocol.ApprovalAll}, []string{"ping", "sleep", "finish", "mark"}},
	} {
		req, _ := json.Marshal(protocol.CatalogRequest{AgentID: "a1", TurnID: "t9", Context: protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{diagnostics.Binding: true}, Approval: c.scope}})
		m, err := r.g.nc.Request(protocol.SubjectTools, req, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var reply protocol.CatalogReply
		if err := json.Unmarshal(m.Data, &reply); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(reply.Approval, c.want) {
			t.Errorf("%+v: approval %v, want %v", c.scope, reply.Approval, c.want)
		}
		if strings.Contains(string(reply.Tools), "approval") {
			t.Errorf("the tool definitions carry an approval field: %s", reply.Tools)
		}
	}
	// A wrong type is a clear error reply.
	m, err := r.g.nc.Request(protocol.SubjectTools, []byte(`{"agent_id":"a1","turn_id":"t9","context":{"kind":"text","approval":true}}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if desc := m.Header.Get("Nats-Service-Error"); !strings.Contains(desc, "context.approval must be") {
		t.Errorf("error reply %q %s", desc, m.Data)
	}
	// In a step: the context's names add to the worker's none.
	ev := r.g.watch("a1", "t9")
	body := step("a1", "t9", 0, fc("c1", "mark", `{"label":"ctx"}`))
	body["context"].(map[string]any)["approval"] = []string{"mark"}
	r.g.publish(protocol.Subject(protocol.PrefixCall, "a1", "t9"), protocol.StepMsgID("a1", "t9", 0), body)
	pendingEvent(t, ev, "a1", "t9", 0)
	r.answer("a1", "t9", 0, protocol.ApprovalMsgID("a1", "t9", 0, 1), protocol.Decision{CallID: "c1", Approved: true})
	if outs, _ := ev.untilDone(); outs["c1"].Status != "ok" {
		t.Fatalf("outputs %+v", outs)
	}
	// A step without it runs at once.
	r.g.sendStep("a1", "t9", 1, fc("c1", "mark", `{"label":"plain"}`))
	if outs, _ := ev.untilDone(); outs["c1"].Status != "ok" {
		t.Fatalf("outputs %+v", outs)
	}
	if m := r.marks(); !slices.Equal(m, []string{"ctx", "plain"}) {
		t.Errorf("marks %v", m)
	}
}

// TestApprovalTimeoutMustFitStateTTL: a pending step lives in TURN_STATE,
// so the worker refuses a wait longer than the state is kept.
func TestApprovalTimeoutMustFitStateTTL(t *testing.T) {
	t.Parallel()
	cfg := engine.Config{Approval: turn.Policy{Timeout: 48 * time.Hour}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "shorter than the state TTL") {
		t.Errorf("validate: %v", err)
	}
	if err := (engine.Config{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestIncompatibleApprovalsConsumerStopsTheStart: an approval-workers
// consumer that filters on other subjects would take the timers out of the
// work queue, or miss the answers; the worker refuses to start over it.
func TestIncompatibleApprovalsConsumerStopsTheStart(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx := context.Background()
	if err := bus.Setup(ctx, js, testConfig().Topology); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteConsumer(ctx, protocol.StreamApprovals, protocol.ConsumerApprovals); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, protocol.StreamApprovals, jetstream.ConsumerConfig{Durable: protocol.ConsumerApprovals, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "turn.approval.>"}); err != nil {
		t.Fatal(err)
	}
	_, err := newWorker(ctx, s.Connect(t))
	if err == nil || !errors.Is(err, bus.ErrIncompatible) || !strings.Contains(err.Error(), `it filters on "turn.approval.>"`) {
		t.Fatalf("worker.New: %v, want an incompatible-filter error", err)
	}
}

// TestApprovalStrayMessagesAreDeadLettered: what lands on the timeout or
// cancel subjects that is not the worker's own is dead-lettered, and
// changes nothing.
func TestApprovalStrayMessagesAreDeadLettered(t *testing.T) {
	t.Parallel()
	r := newApprovalRig(t, turn.Policy{})
	dead := r.g.watchSubject(protocol.StreamDead, protocol.PrefixDead+".>")
	for _, subj := range []string{"turn.approval.timeout.a%b.t.0", "turn.approval.timeout.a.t.01", "turn.approval.cancel.a.t%"} {
		r.g.publish(subj, "", "{}")
		if e := dead.next(); !strings.Contains(e.Header.Get(protocol.HeaderDeadReason), "is not turn.approval.<agent_id>.<turn_id>") || e.Header.Get(protocol.HeaderDeadSubject) != subj {
			t.Errorf("%s: dead letter %v", subj, e.Header)
		}
	}
}

// TestApprovalReusedCallIDInAHeldStep: a step re-sent with a call id its
// first version used for another call, and a call that needs approval:
// once decided, its events are versioned as any re-sent step's, so none is
// dropped as the first version's duplicate.
func TestApprovalReusedCallIDInAHeldStep(t *testing.T) {
	t.Parallel()
	r := newApprovalRig(t, turn.Policy{Names: []string{"mark"}})
	ev := r.g.watch("a1", "t10")
	r.g.sendStep("a1", "t10", 0, fc("c1", "ping", `{}`))
	if outs, _ := ev.untilDone(); outs["c1"].Status != "ok" {
		t.Fatalf("outputs %+v", outs)
	}
	// c1 is now another call, whose arguments are invalid: answered as
	// reused when the step is held, and never offered.
	r.g.publish(protocol.Subject(protocol.PrefixCall, "a1", "t10"), "resent", step("a1", "t10", 0, fc("c1", "ping", `{"note":5}`), fc("c2", "mark", `{"label":"y"}`)))
	if p := pendingEvent(t, ev, "a1", "t10", 0); len(p.Approvals) != 1 || p.Approvals[0].CallID != "c2" {
		t.Fatalf("approvals %+v", p.Approvals)
	}
	r.answer("a1", "t10", 0, protocol.ApprovalMsgID("a1", "t10", 0, 1), protocol.Decision{CallID: "c2", Approved: true})
	outs, done := ev.untilDone()
	if errKind(outs["c1"]) != "invalid_arguments" || outs["c2"].Status != "ok" || len(done.Items) != 2 {
		t.Fatalf("outputs %+v", outs)
	}
	if id := done.Header.Get("Nats-Msg-Id"); id == protocol.StepDoneMsgID("a1", "t10", 0) {
		t.Errorf("the re-sent step's step.done has the first version's id %q", id)
	}
	if m := r.marks(); !slices.Equal(m, []string{"y"}) {
		t.Errorf("marks %v", m)
	}
}
