package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// approvalRig is a real worker that holds calls for approval under
// policy, serving diagnostics with mark (each run appends its label to a
// file, so what ran, and how often, is on disk), and a gateway client.
type approvalRig struct {
	t       *testing.T
	js      jetstream.JetStream
	c       *gateway.Client
	markDir string
}

func newApprovalRig(t *testing.T, policy turn.Policy) *approvalRig {
	t.Helper()
	srv := natstest.Start(t)
	r := &approvalRig{t: t, markDir: t.TempDir()}
	cfg := workertest.Config("w1")
	cfg.Approval = policy
	workertest.RunWorkerWith(t, srv, cfg, func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{diagnostics.Category(diagnostics.Config{MarkDir: r.markDir})}, nil
	})
	nc := srv.Connect(t)
	var err error
	if r.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	if r.c, err = gateway.New(nc, gateway.Options{Logger: workertest.Logger()}); err != nil {
		t.Fatal(err)
	}
	return r
}

// marks are the labels mark appended, in order.
func (r *approvalRig) marks() []string {
	b, err := os.ReadFile(filepath.Join(r.markDir, "marks.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// settled waits until the worker has handled every message of
// TURN_APPROVALS that its consumer takes (answers, fired timers), so that
// what those messages did, or did not do, can be checked.
func (r *approvalRig) settled(ctx context.Context) {
	r.t.Helper()
	cons, err := r.js.Consumer(ctx, protocol.StreamApprovals, protocol.ConsumerApprovals)
	if err != nil {
		r.t.Fatal(err)
	}
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			r.t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return
		}
		select {
		case <-ctx.Done():
			r.t.Fatalf("the approvals consumer still has %d pending, %d unacknowledged", info.NumPending, info.NumAckPending)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// storedDone waits until the last message of TURN_OUTPUTS on a1's turn
// is a step.done: a run may read it from core NATS before the stream
// has stored it.
func (r *approvalRig) storedDone(ctx context.Context, turnID string) {
	r.t.Helper()
	st, err := r.js.Stream(ctx, protocol.StreamOutputs)
	if err != nil {
		r.t.Fatal(err)
	}
	for {
		m, err := st.GetLastMsgForSubject(ctx, protocol.Subject(protocol.PrefixOutput, "a1", turnID))
		if err == nil && strings.Contains(string(m.Data), `"type":"step.done"`) {
			return
		}
		select {
		case <-ctx.Done():
			r.t.Fatalf("no step.done stored: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// outputsSeq is the last sequence of TURN_OUTPUTS: unchanged, nothing was
// published.
func (r *approvalRig) outputsSeq(ctx context.Context) uint64 {
	r.t.Helper()
	info, err := r.js.Stream(ctx, protocol.StreamOutputs)
	if err != nil {
		r.t.Fatal(err)
	}
	return info.CachedInfo().State.LastSeq
}

// pending reads the run's first event, which must be its step.pending:
// nothing of a held step is published before it.
func pending(t *testing.T, ctx context.Context, run *gateway.StepRun) *protocol.StepPending {
	t.Helper()
	ev, err := run.Next(ctx)
	// A re-sent step's run reads the turn's old dead letters too, racing
	// its events: a dead-lettered answer is skipped.
	for dl := (*gateway.DeadLetterError)(nil); errors.As(err, &dl) && !dl.Step; {
		ev, err = run.Next(ctx)
	}
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	p, ok := ev.(*protocol.StepPending)
	if !ok {
		t.Fatalf("first event %T %+v, want the step.pending", ev, ev)
	}
	return p
}

// checkExpiry fails unless expiresAt is the hold's time plus timeout, in
// whole seconds: the hold happened between before and after.
func checkExpiry(t *testing.T, expiresAt, before, after time.Time, timeout time.Duration) {
	t.Helper()
	lo, hi := before.Add(timeout).Truncate(time.Second), after.Add(timeout)
	if expiresAt.Before(lo) || expiresAt.After(hi) || expiresAt.Location() != time.UTC || !expiresAt.Equal(expiresAt.Truncate(time.Second)) {
		t.Fatalf("expires_at %s, want a whole UTC second in [%s, %s]", expiresAt, lo, hi)
	}
}

// callText is the output text the model reads in a function_call_output.
func callText(t *testing.T, item json.RawMessage) string {
	t.Helper()
	var it struct {
		Output string `json:"output"`
	}
	if err := json.Unmarshal(item, &it); err != nil {
		t.Fatalf("item %s: %v", item, err)
	}
	return it.Output
}

// A held step through the client: the run's first event is the real
// step.pending with the validated (repaired) arguments; an incomplete
// answer is dead-lettered and its correction (n = 2) decides, approving
// one call and refusing the other with a reason; the same run goes on to
// every call's output and the step.done without another Send. Answers
// after the decision, and the step sent again, run nothing twice.
func TestApprovalDecidedThroughTheClient(t *testing.T) {
	t.Parallel() // its own server
	r := newApprovalRig(t, turn.Policy{Names: []string{"mark"}})
	ctx := ctxT(t)
	cat, err := r.c.Catalog(ctx, "a1", "t1", diagCtx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cat.Approval, []string{"mark"}) {
		t.Fatalf("catalog approval %v, want [mark]", cat.Approval)
	}
	step := protocol.Step{AgentID: "a1", TurnID: "t1", Step: 0, Context: diagCtx, Output: []json.RawMessage{
		fc("c1", "ping", `{"note":"x"}`),
		fc("c2", "mark", `{"label":"yes",}`), // a trailing comma: repaired before it is shown
		fc("c3", "mark", `{"label":"no"}`),
		fc("c4", "mark", `{"label":5}`), // invalid: answered, never offered for approval
	}}
	before := time.Now()
	run, err := r.c.Send(ctx, step, gateway.WithActivity())
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	p := pending(t, ctx, run)
	checkExpiry(t, p.ExpiresAt, before, time.Now(), turn.DefaultApprovalTimeout)
	want := []protocol.PendingCall{
		{CallID: "c2", Name: "mark", Arguments: json.RawMessage(`{"label":"yes"}`), Reason: "named", Activity: "Marking yes"},
		{CallID: "c3", Name: "mark", Arguments: json.RawMessage(`{"label":"no"}`), Reason: "named", Activity: "Marking no"},
	}
	if p.AgentID != "a1" || p.TurnID != "t1" || p.Step != 0 || !slices.EqualFunc(p.Approvals, want, func(a, b protocol.PendingCall) bool {
		return a.CallID == b.CallID && a.Name == b.Name && a.Namespace == b.Namespace && string(a.Arguments) == string(b.Arguments) &&
			a.Reason == b.Reason && a.Activity == b.Activity
	}) {
		t.Fatalf("step.pending %+v", p)
	}
	if m := r.marks(); len(m) != 0 {
		t.Fatalf("marks before any decision: %v", m)
	}

	// An answer that misses c3 is dead-lettered with its reason, and the
	// step stays pending.
	dead, err := r.js.OrderedConsumer(ctx, protocol.StreamDead, jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.Subject(protocol.PrefixDead, "a1", "t1")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.c.Decide(ctx, "a1", "t1", 0, 1, []protocol.Decision{{CallID: "c2", Approved: true}}); err != nil {
		t.Fatal(err)
	}
	dm, err := dead.Next(jetstream.FetchMaxWait(20 * time.Second))
	if err != nil {
		t.Fatalf("no dead letter for the incomplete answer: %v", err)
	}
	if reason := dm.Headers().Get(protocol.HeaderDeadReason); !strings.Contains(reason, `no decision for the pending call(s) "c3"`) {
		t.Fatalf("dead-letter reason %q", reason)
	}
	r.settled(ctx)
	if m := r.marks(); len(m) != 0 {
		t.Fatalf("an incomplete answer ran %v", m)
	}
	// The run says so too, once, with the reason, and goes on.
	var dl *gateway.DeadLetterError
	if _, err := run.Next(ctx); !errors.As(err, &dl) || dl.Step || !strings.Contains(dl.Reason, `"c3"`) {
		t.Fatalf("Next after the incomplete answer: %v, want its dead letter", err)
	}
	// The correction, under n = 2 (n = 1 again would be dropped as a
	// duplicate of the dead-lettered answer), decides.
	if err := r.c.Decide(ctx, "a1", "t1", 0, 2, []protocol.Decision{{CallID: "c3", Reason: "not on main"}, {CallID: "c2", Approved: true}}); err != nil {
		t.Fatal(err)
	}
	outs, _, done := drain(t, ctx, run)
	if len(outs) != 4 || outs["c1"].Status != protocol.StatusOK || outs["c2"].Status != protocol.StatusOK {
		t.Fatalf("outputs %+v", outs)
	}
	if got := callText(t, outs["c2"].Item); got != "marked yes" || !slices.Equal(outs["c2"].Repairs, []string{"trailing_commas"}) {
		t.Fatalf("c2 ran %q with repairs %v", got, outs["c2"].Repairs)
	}
	if e := outs["c3"].Error; e == nil || e.Kind != protocol.Rejected || !strings.Contains(e.Message, "not on main") ||
		!strings.Contains(callText(t, outs["c3"].Item), "not on main") {
		t.Fatalf("c3 %+v %s, want rejected with the reason", outs["c3"], outs["c3"].Item)
	}
	if e := outs["c4"].Error; e == nil || e.Kind != protocol.InvalidArguments {
		t.Fatalf("c4 %+v, want invalid_arguments", outs["c4"])
	}
	if done.EndTurn || len(done.Items) != 4 {
		t.Fatalf("step.done %+v", done)
	}
	for i, id := range []string{"c1", "c2", "c3", "c4"} {
		if string(done.Items[i]) != string(outs[id].Item) {
			t.Fatalf("items[%d] %s, want %s's output %s", i, done.Items[i], id, outs[id].Item)
		}
	}
	if m := r.marks(); !slices.Equal(m, []string{"yes"}) {
		t.Fatalf("marks %v", m)
	}

	// The correction once more (dropped by de-duplication) and another
	// answer that approves c3 (ignored: the step is decided): nothing runs
	// and nothing is published.
	r.storedDone(ctx, "t1")
	seq := r.outputsSeq(ctx)
	for n, ds := range map[int][]protocol.Decision{2: {{CallID: "c3"}, {CallID: "c2", Approved: true}}, 3: {{CallID: "c3", Approved: true}, {CallID: "c2", Approved: true}}} {
		if err := r.c.Decide(ctx, "a1", "t1", 0, n, ds); err != nil {
			t.Fatal(err)
		}
	}
	r.settled(ctx)
	if m := r.marks(); !slices.Equal(m, []string{"yes"}) {
		t.Fatalf("marks after the late answers %v", m)
	}
	if got := r.outputsSeq(ctx); got != seq {
		t.Fatalf("the late answers published %d events", got-seq)
	}

	// A gateway that restarted sends the step again: nothing is published,
	// and the run reads the step.pending, the outputs and the step.done
	// the first send caused.
	again, err := r.c.Send(ctx, step)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if p2 := pending(t, ctx, again); len(p2.Approvals) != 2 || !p2.ExpiresAt.Equal(p.ExpiresAt) {
		t.Fatalf("step.pending again %+v", p2)
	}
	// The re-sent run reads the turn's dead letters from the start too: the
	// first, incomplete answer's may come (once) before the step.done, as
	// the two streams' consumers race; it says nothing new and is skipped.
	outs2 := map[string]*protocol.CallOutput{}
	var done2 *protocol.StepDone
	for done2 == nil {
		ev, err := again.Next(ctx)
		var dl *gateway.DeadLetterError
		switch {
		case errors.As(err, &dl) && !dl.Step:
			continue
		case err != nil:
			t.Fatalf("Next of the re-sent step: %v", err)
		}
		switch ev := ev.(type) {
		case *protocol.CallOutput:
			outs2[ev.CallID] = ev
		case *protocol.StepDone:
			done2 = ev
		}
	}
	if len(outs2) != 4 || len(done2.Items) != 4 || string(done2.Items[2]) != string(done.Items[2]) {
		t.Fatalf("again: outputs %+v, step.done %+v", outs2, done2)
	}
	if got := r.outputsSeq(ctx); got != seq {
		t.Fatalf("the re-sent step published %d events", got-seq)
	}
	if m := r.marks(); !slices.Equal(m, []string{"yes"}) {
		t.Fatalf("marks after the re-send %v", m)
	}
}

// Unanswered, the held call is rejected "approval timed out" at
// expires_at, seen through the same run; the call that needed no
// approval runs then. An answer after that is ignored.
func TestApprovalTimeoutThroughTheClient(t *testing.T) {
	t.Parallel() // its own server
	r := newApprovalRig(t, turn.Policy{Names: []string{"mark"}, Timeout: time.Second})
	ctx := ctxT(t)
	before := time.Now()
	run, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t2", Step: 0, Context: diagCtx,
		Output: []json.RawMessage{fc("c1", "mark", `{"label":"late"}`), fc("c2", "ping", `{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	p := pending(t, ctx, run)
	checkExpiry(t, p.ExpiresAt, before, time.Now(), time.Second)
	outs, _, done := drain(t, ctx, run)
	if e := outs["c1"].Error; e == nil || e.Kind != protocol.Rejected || !strings.Contains(e.Message, protocol.ApprovalTimedOut) ||
		!strings.Contains(callText(t, outs["c1"].Item), protocol.ApprovalTimedOut) {
		t.Fatalf("c1 %+v, want rejected: approval timed out", outs["c1"])
	}
	if outs["c2"].Status != protocol.StatusOK || len(done.Items) != 2 || done.EndTurn {
		t.Fatalf("c2 %+v, step.done %+v", outs["c2"], done)
	}
	r.storedDone(ctx, "t2")
	seq := r.outputsSeq(ctx)
	if err := r.c.Decide(ctx, "a1", "t2", 0, 1, []protocol.Decision{{CallID: "c1", Approved: true}}); err != nil {
		t.Fatal(err)
	}
	r.settled(ctx)
	if m := r.marks(); len(m) != 0 || r.outputsSeq(ctx) != seq {
		t.Fatalf("an answer after the timeout ran %v", m)
	}
}

// A step's context can ask for approval where the worker asks for none
// (protocol.ApprovalScope); a cancel while the step is pending answers
// its calls aborted and ends the turn, through the same run.
func TestApprovalFromTheContextAndCancelWhilePending(t *testing.T) {
	t.Parallel() // its own server
	r := newApprovalRig(t, turn.Policy{})
	ctx := ctxT(t)
	tc := diagCtx
	tc.Approval = protocol.ApprovalScope{Level: protocol.ApprovalAll}
	cat, err := r.c.Catalog(ctx, "a1", "t3", tc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cat.Approval, []string{"ping", "sleep", "finish", "mark"}) {
		t.Fatalf("catalog approval %v", cat.Approval)
	}
	run, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t3", Step: 0, Context: tc,
		Output: []json.RawMessage{fc("c1", "mark", `{"label":"x"}`), fc("c2", "ping", `{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if p := pending(t, ctx, run); len(p.Approvals) != 2 || p.Approvals[1].Reason != "all" {
		t.Fatalf("step.pending %+v", p)
	}
	if err := r.c.Cancel(ctx, "a1", "t3", "the user left"); err != nil {
		t.Fatal(err)
	}
	outs, _, done := drain(t, ctx, run)
	for _, id := range []string{"c1", "c2"} {
		if e := outs[id].Error; e == nil || e.Kind != protocol.Aborted || !strings.Contains(e.Message, "the user left") {
			t.Fatalf("%s %+v, want aborted", id, outs[id])
		}
	}
	if !done.EndTurn {
		t.Fatalf("step.done %+v, want end_turn", done)
	}
	if _, err := run.Next(ctx); err != io.EOF {
		t.Fatalf("Next after step.done: %v", err)
	}
	if m := r.marks(); len(m) != 0 {
		t.Fatalf("marks %v", m)
	}
}

// Decide publishes nothing the workers would dead-letter or never read:
// an id with a dot would put the answer on another subject of
// TURN_APPROVALS (turn.approval.cancel.a1.t1 is turn a1.t1's cancel note).
func TestDecideRefusesWhatNoWorkerWouldTake(t *testing.T) {
	t.Parallel() // its own server
	r := newApprovalRig(t, turn.Policy{})
	ctx := ctxT(t)
	ok := []protocol.Decision{{CallID: "c1", Approved: true}}
	for name, c := range map[string]struct {
		agent, turn string
		step        int64
		n           int
		ds          []protocol.Decision
	}{
		"n 0":              {"a1", "t1", 0, 0, ok},
		"negative step":    {"a1", "t1", -1, 1, ok},
		"no decisions":     {"a1", "t1", 0, 1, nil},
		"dotted agent id":  {"cancel", "a1.t1", 0, 1, ok},
		"dotted turn id":   {"timeout.a1", "t1.0", 0, 1, ok},
		"empty agent id":   {"", "t1", 0, 1, ok},
		"spaced turn id":   {"a1", "t 1", 0, 1, ok},
		"wildcard turn id": {"a1", "*", 0, 1, ok},
	} {
		if err := r.c.Decide(ctx, c.agent, c.turn, c.step, c.n, c.ds); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	info, err := r.js.Stream(ctx, protocol.StreamApprovals)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.LastSeq; n != 0 {
		t.Fatalf("TURN_APPROVALS got %d messages from refused answers", n)
	}
}

func TestApprovalNamesMatchTheWorkers(t *testing.T) {
	if protocol.ApprovalDestructive != protocol.ApprovalDestructive || protocol.ApprovalAll != protocol.ApprovalAll {
		t.Fatal("approval levels differ from the worker's")
	}
}

// The run tells duplicates by what they are about, not by message id:
// an event stored after the stream's duplicate window may carry the id
// of an event of another kind. Here the output of a call named "pending",
// published once the window has passed (as a decision hours later
// would), has the id of its step's step.pending. The events are the
// worker's shapes, on a stream with a short window; no worker runs.
func TestOutputWithThePendingsIdIsReturned(t *testing.T) {
	t.Parallel() // its own server
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for _, sc := range []jetstream.StreamConfig{
		{Name: protocol.StreamCalls, Subjects: []string{protocol.PrefixCall + ".*.*"}},
		{Name: protocol.StreamOutputs, Subjects: []string{protocol.PrefixOutput + ".*.*"}, Duplicates: 100 * time.Millisecond},
	} {
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	c, err := gateway.New(nc, gateway.Options{Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t1", Step: 0, Context: diagCtx, Output: []json.RawMessage{fc("pending", "mark", `{"label":"x"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	id := protocol.StepPendingMsgID("a1", "t1", 0)
	publish := func(msgID, body string) bool {
		t.Helper()
		m := nats.NewMsg(protocol.Subject(protocol.PrefixOutput, "a1", "t1"))
		m.Data = []byte(body)
		m.Header.Set(jetstream.MsgIDHeader, msgID)
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return !ack.Duplicate
	}
	publish(id, `{"type":"step.pending","agent_id":"a1","turn_id":"t1","step":0,"expires_at":"2026-12-02T09:00:00Z",
		"approvals":[{"call_id":"pending","name":"mark","namespace":"","arguments":{"label":"x"},"reason":"named","activity":"Marking x"}]}`)
	item := `{"type":"function_call_output","call_id":"pending","output":"marked x"}`
	// Until the window has passed, the server drops the copy and stores
	// nothing.
	for !publish(id, `{"type":"call.output","agent_id":"a1","turn_id":"t1","step":0,"call_id":"pending","name":"mark","namespace":"","status":"ok","error":null,"item":`+item+`}`) {
		if ctx.Err() != nil {
			t.Fatal("the duplicate window never passed")
		}
	}
	publish(protocol.StepDoneMsgID("a1", "t1", 0), `{"type":"step.done","agent_id":"a1","turn_id":"t1","step":0,"items":[`+item+`],"end_turn":false}`)
	pending(t, ctx, run)
	outs, _, _ := drain(t, ctx, run)
	if o := outs["pending"]; o == nil || string(o.Item) != item {
		t.Fatalf("outputs %+v, want the output of the call named pending", outs)
	}
}

// A gateway that restarts long after it sent a held step (past the
// duplicate window of TURN_CALLS, so the stream stores the step again)
// sends it once more: the worker finds the step decided and publishes
// nothing, so the run must read the events the first send caused.
func TestResentDecidedStepPastTheWindow(t *testing.T) {
	t.Parallel() // its own server
	r := newApprovalRig(t, turn.Policy{Names: []string{"mark"}})
	ctx := ctxT(t)
	first, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t4", Step: 0, Context: diagCtx}) // the turn's history
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	first.Close()
	// Step 1's first send, under a message id the stream has forgotten
	// (as it forgets Send's once the window has passed), held and then
	// decided.
	step := protocol.Step{AgentID: "a1", TurnID: "t4", Step: 1, Context: diagCtx, Output: []json.RawMessage{fc("c1", "mark", `{"label":"once"}`)}}
	body, _ := json.Marshal(map[string]any{"agent_id": "a1", "turn_id": "t4", "step": 1, "context": diagCtx, "output": step.Output})
	m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, "a1", "t4"))
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, "long-ago")
	before := r.outputsSeq(ctx)
	if _, err := r.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	r.waitState(ctx, "approval.a1.t4.1", turn.StatePending)
	// A gateway decides once it saw the step.pending; the record is
	// stored just before that is published.
	waitFor(t, ctx, func() bool { return r.outputsSeq(ctx) > before }, "the step.pending")
	if err := r.c.Decide(ctx, "a1", "t4", 1, 1, []protocol.Decision{{CallID: "c1", Approved: true}}); err != nil {
		t.Fatal(err)
	}
	r.waitState(ctx, "approval.a1.t4.1", turn.StateDone)
	r.storedDone(ctx, "t4")
	seq := r.outputsSeq(ctx)

	again, err := r.c.Send(ctx, step)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	pending(t, ctx, again)
	outs, _, done := drain(t, ctx, again)
	if outs["c1"].Status != protocol.StatusOK || len(done.Items) != 1 {
		t.Fatalf("outputs %+v, step.done %+v", outs, done)
	}
	// The worker took the re-sent step off the work queue and ran nothing.
	waitFor(t, ctx, func() bool {
		info, err := r.js.Stream(ctx, protocol.StreamCalls)
		return err == nil && info.CachedInfo().State.Msgs == 0
	}, "the re-sent step to be consumed")
	if m := r.marks(); !slices.Equal(m, []string{"once"}) || r.outputsSeq(ctx) != seq {
		t.Fatalf("marks %v; %d events published for the re-send", m, r.outputsSeq(ctx)-seq)
	}
}

// waitState waits until TURN_STATE's key holds a held step in state.
func (r *approvalRig) waitState(ctx context.Context, key, state string) {
	r.t.Helper()
	kv, err := r.js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		r.t.Fatal(err)
	}
	waitFor(r.t, ctx, func() bool {
		e, err := kv.Get(ctx, key)
		var p turn.PendingStep
		return err == nil && json.Unmarshal(e.Value(), &p) == nil && p.State == state
	}, key+" to be "+state)
}

// waitFor polls cond until it holds, or fails the test when ctx ends.
func waitFor(t *testing.T, ctx context.Context, cond func() bool, what string) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
