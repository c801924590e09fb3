package engine_test

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// kill ends a worker process with SIGKILL: nothing of it is left to
// finish what it held.
func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// TestApprovalPendingStepOutlivesItsWorker holds a step on worker A,
// kills A, answers while no worker runs, and has worker B, started
// afterwards, finish the step with the approved call run once.
func TestApprovalPendingStepOutlivesItsWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs worker processes")
	}
	// Its worker processes mostly wait (leases, timers, restarts):
	// it runs beside the other process tests.
	t.Parallel()
	bin := buildWorker(t)
	s := natstest.Start(t)
	a := startProcess(t, bin, s.ClientURL(), "A", "--approval", "mark")
	g := newGateway(t, s)
	waitForInstances(t, g.nc, 1)
	ev := g.watch("k", "t1")
	g.sendStep("k", "t1", 0, fc("c1", "mark", `{"label":"kept"}`), fc("c2", "ping", `{}`))
	e := ev.next()
	if e.Type != protocol.EventStepPending {
		t.Fatalf("got %s, want step.pending", e.Raw)
	}
	a.kill(t)
	r := &approvalRig{t: t, g: g}
	r.answer("k", "t1", 0, protocol.ApprovalMsgID("k", "t1", 0, 1), protocol.Decision{CallID: "c1", Approved: true})
	b := startProcess(t, bin, s.ClientURL(), "B", "--approval", "mark")
	outs, done := ev.untilDone()
	if outs["c1"].Status != "ok" || outs["c2"].Status != "ok" || len(done.Items) != 2 {
		t.Fatalf("outputs %+v", outs)
	}
	if m := append(a.marks(t), b.marks(t)...); !slices.Equal(m, []string{"kept"}) {
		t.Errorf("marks %v", m)
	}
}

// TestApprovalTimerFiresWithoutAWorker holds a step with a short timeout,
// kills its worker, waits until the server has fired the step's timer
// while no worker runs, then starts another worker, which answers the
// pending call rejected.
func TestApprovalTimerFiresWithoutAWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs worker processes")
	}
	// Its worker processes mostly wait (leases, timers, restarts):
	// it runs beside the other process tests.
	t.Parallel()
	bin := buildWorker(t)
	s := natstest.Start(t)
	a := startProcess(t, bin, s.ClientURL(), "A", "--approval", "mark", "--approval-timeout", "2s")
	g := newGateway(t, s)
	waitForInstances(t, g.nc, 1)
	ev := g.watch("k", "t2")
	g.sendStep("k", "t2", 0, fc("c1", "mark", `{"label":"late"}`))
	if e := ev.next(); e.Type != protocol.EventStepPending {
		t.Fatalf("got %s, want step.pending", e.Raw)
	}
	a.kill(t)
	stream, err := g.js.Stream(context.Background(), protocol.StreamApprovals)
	if err != nil {
		t.Fatal(err)
	}
	fired := protocol.ApprovalTimeoutSubject("k", "t2", 0)
	waitFor(t, func() bool {
		_, err := stream.GetLastMsgForSubject(context.Background(), fired)
		return err == nil
	}, "the timer to fire")
	b := startProcess(t, bin, s.ClientURL(), "B", "--approval", "mark", "--approval-timeout", "2s")
	outs, _ := ev.untilDone()
	if errKind(outs["c1"]) != "rejected" {
		t.Fatalf("outputs %+v", outs)
	}
	if _, text := itemOutput(t, outs["c1"].Item); !strings.Contains(text, protocol.ApprovalTimedOut) {
		t.Errorf("the model reads %q", text)
	}
	if m := append(a.marks(t), b.marks(t)...); len(m) != 0 {
		t.Errorf("marks %v", m)
	}
}

// TestApprovalDecisionRedeliveredAfterAKill approves a slow mark, kills
// the worker running it, and has the answer redelivered to another: the
// journal knows the call began, so it is answered interrupted, not run
// again, and the step still completes once.
func TestApprovalDecisionRedeliveredAfterAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs worker processes")
	}
	// Its worker processes mostly wait (leases, timers, restarts):
	// it runs beside the other process tests.
	t.Parallel()
	bin := buildWorker(t)
	s := natstest.Start(t)
	a := startProcess(t, bin, s.ClientURL(), "A", "--approval", "mark")
	g := newGateway(t, s)
	waitForInstances(t, g.nc, 1)
	ev := g.watch("k", "t3")
	g.sendStep("k", "t3", 0, fc("c1", "mark", `{"label":"slow","ms":60000}`), fc("c2", "ping", `{}`))
	if e := ev.next(); e.Type != protocol.EventStepPending {
		t.Fatalf("got %s, want step.pending", e.Raw)
	}
	r := &approvalRig{t: t, g: g}
	r.answer("k", "t3", 0, protocol.ApprovalMsgID("k", "t3", 0, 1), protocol.Decision{CallID: "c1", Approved: true})
	waitFor(t, func() bool { return len(a.marks(t)) > 0 }, "the approved mark to start")
	a.kill(t)
	b := startProcess(t, bin, s.ClientURL(), "B", "--approval", "mark")
	outs, done := ev.untilDone()
	if errKind(outs["c1"]) != "interrupted" || outs["c2"].Status != "ok" || len(done.Items) != 2 {
		t.Fatalf("outputs %+v", outs)
	}
	if m := append(a.marks(t), b.marks(t)...); !slices.Equal(m, []string{"slow"}) {
		t.Errorf("marks %v", m)
	}
	ev.quiet(time.Second)
}
