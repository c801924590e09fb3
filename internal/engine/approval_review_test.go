package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/turnstate"
	"github.com/agentbull/toolruntime/protocol"
)

// TestApprovalSlowApprovedCallOnTwoWorkers: two workers share the
// approvals consumer; an approved call that runs for more than twice the
// ack wait keeps its answer's lease, so the other worker never gets the
// answer again (which would answer the call interrupted while it runs).
// The approved calls report progress and complete as any call does.
func TestApprovalSlowApprovedCallOnTwoWorkers(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	markDir := t.TempDir()
	cfg := testConfig() // ack wait 2s
	cfg.Approval = turn.Policy{All: true}
	for range 2 {
		startWorker(t, s, cfg, diagnostics.Category(diagnostics.Config{MarkDir: markDir}))
	}
	r := &approvalRig{t: t, s: s, markDir: markDir, g: newGateway(t, s)}
	var mu sync.Mutex
	var states []string
	sub, err := r.g.nc.Subscribe(protocol.Subject(protocol.PrefixActive, "a1", "s1"), func(m *nats.Msg) {
		var a protocol.Activity
		_ = json.Unmarshal(m.Data, &a)
		mu.Lock()
		states = append(states, a.CallID+":"+a.State)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	ev := r.g.watch("a1", "s1")
	r.g.sendStep("a1", "s1", 0, fc("c1", "mark", `{"label":"slow","ms":5000}`), fc("c2", "sleep", `{"ms":1500,"report_every_ms":100}`))
	if p := pendingEvent(t, ev, "a1", "s1", 0); len(p.Approvals) != 2 {
		t.Fatalf("approvals %+v", p.Approvals)
	}
	r.answer("a1", "s1", 0, protocol.ApprovalMsgID("a1", "s1", 0, 1), protocol.Decision{CallID: "c1", Approved: true}, protocol.Decision{CallID: "c2", Approved: true})
	outs, done := ev.untilDone()
	if outs["c1"].Status != "ok" || outs["c2"].Status != "ok" || len(done.Items) != 2 {
		t.Fatalf("outputs %+v", outs)
	}
	ev.quiet(time.Second)
	if m := r.marks(); !slices.Equal(m, []string{"slow"}) {
		t.Errorf("marks %v", m)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"c1:started", "c2:started", "c2:progress", "c2:completed", "c1:completed"} {
		if !slices.Contains(states, want) {
			t.Errorf("no %s activity among %v", want, states)
		}
	}
}

// TestApprovalHostileAnswers: answers a gateway might send by mistake or
// malice, against one pending step whose second call has invalid
// arguments (answered invalid_arguments, never offered).
func TestApprovalHostileAnswers(t *testing.T) {
	t.Parallel()
	r := newApprovalRig(t, turn.Policy{Names: []string{"mark"}})
	ev := r.g.watch("a1", "h1")
	dead := r.g.watchSubject(protocol.StreamDead, protocol.Subject(protocol.PrefixDead, "a1", "h1"))
	r.g.sendStep("a1", "h1", 3, fc("c1", "mark", `{"label":"x"}`), fc("c2", "mark", `{"label":"has space"}`))
	if p := pendingEvent(t, ev, "a1", "h1", 3); len(p.Approvals) != 1 || p.Approvals[0].CallID != "c1" {
		t.Fatalf("approvals %+v", p.Approvals)
	}
	subject := protocol.Subject(protocol.PrefixApproval, "a1", "h1")
	for i, c := range []struct{ body, reason string }{
		// Approving the call that was never offered.
		{`{"agent_id":"a1","turn_id":"h1","step":3,"decisions":[{"call_id":"c1","approved":true},{"call_id":"c2","approved":true}]}`, `call "c2" is not pending approval in step 3`},
		// The right call ids, another step.
		{`{"agent_id":"a1","turn_id":"h1","step":2,"decisions":[{"call_id":"c1","approved":true}]}`, `step 2 of turn a1.h1 is not pending approval`},
		{`{"agent_id":"a1","turn_id":"h1","step":3,"decisions":[{"call_id":"c1","approved":true},{"call_id":"c1","approved":false}]}`, `decided twice`},
		{`{"agent_id":"a1","turn_id":"h1","step":3.5,"decisions":[{"call_id":"c1","approved":true}]}`, `cannot unmarshal`},
		{`{"agent_id":"a1","turn_id":"h1","step":3,"decisions":[{"call_id":"c1","approved":true}]} {}`, `data after`},
		{`{"agent_id":"a1","turn_id":"h1","step":3,"decisions":[{"call_id":"c1","approved":true,"reason":7}]}`, `cannot unmarshal`},
		{`{"agent_id":"a1","turn_id":"h1","step":3,"decisions":[]}`, `decisions is empty`},
		{`{"agent_id":"a1","turn_id":"h1","step":3,"decisions":[{"call_id":"","approved":true}]}`, `call_id is not`},
	} {
		r.g.publish(subject, protocol.ApprovalMsgID("a1", "h1", 3, i+1), c.body)
		if got := dead.next().Header.Get(protocol.HeaderDeadReason); !strings.Contains(got, c.reason) {
			t.Errorf("answer %d: dead-letter reason %q, want one saying %q", i+1, got, c.reason)
		}
	}
	ev.quiet(200 * time.Millisecond)
	// Unknown fields are ignored; a long reason with control characters
	// and markup reaches the model clipped, inside the JSON string.
	reason := "no\n\x00\x1b[31m</output>" + strings.Repeat("why ", 2000)
	body, _ := json.Marshal(map[string]any{"agent_id": "a1", "turn_id": "h1", "step": 3, "extra": map[string]any{"x": 1},
		"decisions": []map[string]any{{"call_id": "c1", "approved": false, "reason": reason, "by": "ops"}}})
	r.g.publish(subject, protocol.ApprovalMsgID("a1", "h1", 3, 20), json.RawMessage(body))
	outs, done := ev.untilDone()
	if errKind(outs["c1"]) != "rejected" || errKind(outs["c2"]) != "invalid_arguments" || len(done.Items) != 2 {
		t.Fatalf("outputs %+v", outs)
	}
	_, text := itemOutput(t, outs["c1"].Item)
	if !strings.Contains(text, "refused it: no\n") || len(text) > 2<<10 {
		t.Errorf("the model reads %d bytes: %q", len(text), text)
	}
	if m := r.marks(); len(m) != 0 {
		t.Errorf("marks %v", m)
	}
}

// TestApprovalCancelNoteWithoutItsMark: a worker that heard a cancel but
// could not write the turn's cancel mark still publishes its note; the
// step the note decides is a cancelled step all the same: every call
// that validation did not refuse aborted (the one that needed no
// approval too), and end_turn set.
func TestApprovalCancelNoteWithoutItsMark(t *testing.T) {
	t.Parallel()
	r := newApprovalRig(t, turn.Policy{Names: []string{"mark"}})
	ev := r.g.watch("a1", "n1")
	r.g.sendStep("a1", "n1", 0, fc("c1", "mark", `{"label":"x"}`), fc("c2", "ping", `{}`), fc("c3", "nope", `{}`))
	pendingEvent(t, ev, "a1", "n1", 0)
	r.g.publish(protocol.Subject(protocol.PrefixApprovalCancel, "a1", "n1"), "a1.n1.cancel", protocol.Cancel{Reason: "user left"})
	outs, done := ev.untilDone()
	if errKind(outs["c1"]) != "aborted" || errKind(outs["c2"]) != "aborted" || errKind(outs["c3"]) != "unknown_tool" || !done.EndTurn {
		t.Fatalf("outputs %+v, step.done %s", outs, done.Raw)
	}
	if _, text := itemOutput(t, outs["c2"].Item); !strings.Contains(text, "user left") {
		t.Errorf("the model reads %q", text)
	}
	if m := r.marks(); len(m) != 0 {
		t.Errorf("marks %v", m)
	}
}

// TestApprovalTimerOfAnExpiredRecord: a pending step's record that left
// TURN_STATE before its timer fired (a fleet member shrank the bucket's
// TTL, an operator purged it) can never be finished; the fired timer is
// dead-lettered to the turn's dead letters with its reason, so that the
// gateway learns that the step will get no step.done.
func TestApprovalTimerOfAnExpiredRecord(t *testing.T) {
	t.Parallel()
	r := newApprovalRig(t, turn.Policy{Names: []string{"mark"}, Timeout: 2 * time.Second})
	ev := r.g.watch("a1", "x1")
	dead := r.g.watchSubject(protocol.StreamDead, protocol.Subject(protocol.PrefixDead, "a1", "x1"))
	r.g.sendStep("a1", "x1", 0, fc("c1", "mark", `{"label":"x"}`))
	pendingEvent(t, ev, "a1", "x1", 0)
	kv, err := r.g.js.KeyValue(context.Background(), protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(context.Background(), turnstate.PendingKey("a1", "x1", 0)); err != nil {
		t.Fatal(err)
	}
	if got := dead.next().Header.Get(protocol.HeaderDeadReason); !strings.Contains(got, "step 0 of turn a1.x1 is not pending approval") {
		t.Errorf("dead-letter reason %q", got)
	}
	ev.quiet(200 * time.Millisecond)
}
