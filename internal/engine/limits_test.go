package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/category/skills"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/internal/wire"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// The tests of this file play the careless gateway and the misbehaving
// model of the size limits (docs/protocol.md, "Size limits"): each one
// ends with a step.done, a dead letter or an error reply, and says how
// what was too large was clipped.

type bigParams struct {
	KB int `json:"kb" jsonschema:"minimum=1,maximum=1024"`
}

type todoItem struct {
	Text string `json:"text"`
	Done bool   `json:"done"`
}

type todoParams struct {
	Items []todoItem `json:"items"`
}

// sizeCategory offers "big", a read_file-like tool that returns kb KiB of
// text that starts with HEAD and ends with TAIL (and details as large),
// and "todo", a todo_write-like tool with a list of objects.
func sizeCategory() tool.Category {
	big := tool.Must(tool.Def[bigParams]{
		Spec: tool.Spec{Name: "big", Description: "returns kb KiB of text", ExecutionMode: tool.Parallel, ReadOnly: true},
		Execute: func(_ context.Context, p bigParams) (tool.Result, error) {
			body := "HEAD" + strings.Repeat("line of a large file\n", p.KB*1024/21) + "TAIL"
			return tool.Result{Content: body, Details: map[string]string{"copy": body}}, nil
		},
	})
	todo := tool.Must(tool.Def[todoParams]{
		Spec: tool.Spec{Name: "todo", Description: "writes a todo list", ExecutionMode: tool.Sequential},
		Execute: func(_ context.Context, p todoParams) (tool.Result, error) {
			return tool.Result{Content: fmt.Sprintf("%d items", len(p.Items))}, nil
		},
	})
	ts := []*tool.Tool{big, todo}
	return tool.Category{Name: "test", Tools: func(context.Context, tool.Turn) ([]*tool.Tool, error) { return ts, nil }}
}

// maxPayload is the test server's max payload, as the worker reads it.
func maxPayload(t *testing.T, g *gateway) int {
	t.Helper()
	return int(g.nc.MaxPayload())
}

func TestEightyLargeOutputsAllFitStepDone(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), sizeCategory())
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	var calls []call
	for i := range 80 {
		calls = append(calls, fc(fmt.Sprintf("c%02d", i), "big", `{"kb":20}`))
	}
	g.sendStep("a", "t", 0, calls...)
	outputs, done := evs.untilDone()
	if len(outputs) != 80 || len(done.Items) != 80 {
		t.Fatalf("%d call.output events and %d step.done items, want 80 each", len(outputs), len(done.Items))
	}
	if len(done.Raw) > maxPayload(t, g) {
		t.Errorf("step.done is %d bytes, over the max payload %d", len(done.Raw), maxPayload(t, g))
	}
	for i, raw := range done.Items {
		id, out := itemOutput(t, raw)
		if want := fmt.Sprintf("c%02d", i); id != want {
			t.Fatalf("item %d is for %s, want %s", i, id, want)
		}
		// Each output is clipped to its share, keeping its head and tail
		// around a note the model can read.
		if !strings.HasPrefix(out, "HEAD") || !strings.HasSuffix(out, "TAIL") || !strings.Contains(out, "bytes left out") {
			t.Fatalf("item %d is not clipped to head, note and tail: %.200q…", i, out)
		}
		if len(out) < 4<<10 {
			t.Errorf("item %d kept only %d bytes: the budget was not shared out", i, len(out))
		}
	}
	// Each call.output fits on its own, so the output in it is whole.
	for id, ev := range outputs {
		_, out := itemOutput(t, ev.Item)
		if strings.Contains(out, "bytes left out") || !strings.HasSuffix(out, "TAIL") {
			t.Errorf("call.output %s was clipped: %d bytes", id, len(out))
		}
	}
}

func TestHugeOutputAndDetailsAreClipped(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), sizeCategory())
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	g.sendStep("a", "t", 0, fc("c1", "big", `{"kb":1024}`))
	outputs, done := evs.untilDone()
	ev := outputs["c1"]
	if ev.Status != protocol.StatusOK {
		t.Fatalf("status %s: %s", ev.Status, ev.Raw)
	}
	_, out := itemOutput(t, ev.Item)
	if !strings.HasPrefix(out, "HEAD") || !strings.HasSuffix(out, "TAIL") || !strings.Contains(out, "bytes left out") {
		t.Errorf("output not clipped to head, note and tail: %.200q", out)
	}
	var d struct {
		Details wire.DroppedDetails `json:"details"`
	}
	if err := json.Unmarshal(ev.Raw, &d); err != nil || !d.Details.Dropped || d.Details.Bytes < 1<<20 {
		t.Errorf("details not replaced by a note of their size: %+v (%v)", d.Details, err)
	}
	if len(ev.Raw) > maxPayload(t, g) || len(done.Raw) > maxPayload(t, g) {
		t.Errorf("events of %d and %d bytes", len(ev.Raw), len(done.Raw))
	}
}

func TestThousandsOfCallsToAnUnknownTool(t *testing.T) {
	t.Parallel()
	// A 256 KiB max payload, not the default 1 MiB: the worker reads the
	// server's, and a quarter of the calls make the same case at a
	// quarter of the cost under -race.
	const limit = 256 << 10
	s := smallServer(t, limit)
	cfg := testConfig()
	cfg.Topology.MaxMsgSize = limit
	startWorker(t, s, cfg, diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	if got := maxPayload(t, g); got != limit {
		t.Fatalf("max payload %d", got)
	}
	evs := g.watch("a", "t")
	// An unknown tool's item is ~162 bytes whole, so 2,000 whole items
	// (324 KB) are 1.2 times the max payload that step.done must fit in,
	// and every call.output costs.
	const n = 2000
	var calls []call
	for i := range n {
		calls = append(calls, fc("c"+strconv.Itoa(i), "nosuch", "{}"))
	}
	g.sendStep("a", "t", 0, calls...)
	outputs, done := evs.untilDone()
	if len(outputs) != n || len(done.Items) != n {
		t.Fatalf("%d call.output events and %d step.done items, want %d each", len(outputs), len(done.Items), n)
	}
	if len(done.Raw) > maxPayload(t, g) {
		t.Errorf("step.done is %d bytes", len(done.Raw))
	}
	clipped := 0
	for i, raw := range done.Items {
		id, out := itemOutput(t, raw)
		if id != "c"+strconv.Itoa(i) {
			t.Fatalf("item %d is for %s", i, id)
		}
		if strings.Contains(out, "bytes left out") {
			clipped++
		} else if !strings.Contains(out, "unknown_tool") {
			t.Fatalf("item %d neither whole nor clipped: %q", i, out)
		}
	}
	if clipped == 0 {
		t.Errorf("no item clipped, yet %d whole items would not fit", n)
	}
	evs.quiet(500 * time.Millisecond) // one attempt: no redelivery
}

func TestStepTooLargeForAnyStepDoneIsDeadLettered(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	dead := g.watchSubject(protocol.StreamDead, protocol.PrefixDead+".>")
	// Minimal calls: the step fits, but even outputs clipped to a note
	// would not.
	var calls []call
	for i := range 13000 {
		calls = append(calls, call{id: fmt.Sprintf("c%05d", i), name: "x"})
	}
	g.sendStep("a", "t", 0, calls...)
	e := dead.next()
	if r := e.Header.Get(protocol.HeaderDeadReason); !strings.Contains(r, "send fewer calls per step") {
		t.Errorf("reason %q", r)
	}
	evs.quiet(300 * time.Millisecond) // nothing ran
}

func TestHugeViolationListIsCapped(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), sizeCategory())
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	const n = 60000
	args := `{"items":[` + strings.TrimSuffix(strings.Repeat("7,", n), ",") + `]}`
	g.sendStep("a", "t", 0, fc("c1", "todo", args))
	outputs, _ := evs.untilDone()
	ev := outputs["c1"]
	if ev.Error == nil || ev.Error.Kind != string(tool.InvalidArguments) {
		t.Fatalf("not invalid_arguments: %.300s", ev.Raw)
	}
	_, out := itemOutput(t, ev.Item)
	want := fmt.Sprintf("and %d more violations", n-tools.MaxViolations)
	for _, text := range []string{ev.Error.Message, out} {
		if !strings.Contains(text, want) || !strings.Contains(text, "/items/0") {
			t.Errorf("violations not capped with %q: %.500q", want, text)
		}
	}
	if len(ev.Raw) > 64<<10 {
		t.Errorf("call.output is %d bytes for %d listed violations", len(ev.Raw), tools.MaxViolations)
	}
}

func TestHugeCancelReasonIsBounded(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	reason := "START" + strings.Repeat("r", 600<<10) + "END"
	body, _ := json.Marshal(protocol.Cancel{Reason: reason})
	if err := g.nc.Publish(protocol.Subject(protocol.PrefixCancel, "a", "t"), body); err != nil {
		t.Fatal(err)
	}
	kv := must(g.js.KeyValue(context.Background(), protocol.BucketState))
	waitFor(t, func() bool {
		_, err := kv.Get(context.Background(), protocol.TurnKey("a", "t", "cancel"))
		return err == nil
	}, "the cancel mark")
	// Every later step of the turn ends, its calls aborted with the
	// reason clipped.
	for n := range 2 {
		g.sendStep("a", "t", n, fc("c1", "ping", "{}"))
		outputs, done := evs.untilDone()
		ev := outputs["c1"]
		if ev.Error == nil || ev.Error.Kind != string(tool.Aborted) {
			t.Fatalf("step %d: not aborted: %.300s", n, ev.Raw)
		}
		if !strings.Contains(ev.Error.Message, "START") || !strings.Contains(ev.Error.Message, "bytes left out") {
			t.Errorf("reason not clipped with a note: %.300q", ev.Error.Message)
		}
		if len(ev.Raw) > 8<<10 || len(done.Raw) > 8<<10 {
			t.Errorf("events of %d and %d bytes carry the reason", len(ev.Raw), len(done.Raw))
		}
	}
}

func TestGarbageStepNearMaxPayloadIsDeadLetteredTruncated(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	cfg := testConfig()
	cfg.Topology.MaxDeliver = 2
	failing := tool.Category{Name: "failing", Tools: func(_ context.Context, t tool.Turn) ([]*tool.Tool, error) {
		if t.Bound("explode") {
			return nil, fmt.Errorf("this category cannot be built")
		}
		return nil, nil
	}}
	startWorker(t, s, cfg, failing)
	g := newGateway(t, s)
	dead := g.watchSubject(protocol.StreamDead, protocol.PrefixDead+".>")
	limit := maxPayload(t, g)
	// Not JSON, and as large as the stream takes.
	garbage := []byte("GARBAGE" + strings.Repeat("z", limit-200))
	g.publish("turn.call.a.junk", "", garbage)
	// A step that fails on every delivery, padded to near the limit: the
	// delivery-limit advisory dead-letters it.
	pad := strings.Repeat("p", limit-400)
	failingStep := `{"agent_id":"a","turn_id":"boom","step":0,"context":{"kind":"text","bindings":{"explode":true}},"output":[{"type":"message","content":"` + pad + `"}]}`
	g.publish("turn.call.a.boom", "a.boom.0", failingStep)
	got := map[string]event{}
	for range 2 {
		e := dead.next()
		got[e.Header.Get(protocol.HeaderDeadSubject)] = e
	}
	for subject, c := range map[string]struct {
		body   string
		reason string
	}{
		"turn.call.a.junk": {string(garbage), "not a JSON step object"},
		"turn.call.a.boom": {failingStep, "delivery limit reached"},
	} {
		e, ok := got[subject]
		if !ok {
			t.Errorf("%s: no dead letter", subject)
			continue
		}
		h := e.Header
		if !strings.Contains(h.Get(protocol.HeaderDeadReason), c.reason) {
			t.Errorf("%s: reason %q", subject, h.Get(protocol.HeaderDeadReason))
		}
		if h.Get(protocol.HeaderDeadTruncated) != "true" || h.Get(protocol.HeaderDeadSize) != strconv.Itoa(len(c.body)) || h.Get(protocol.HeaderDeadStreamSeq) == "" {
			t.Errorf("%s: headers %v", subject, h)
		}
		if len(e.Raw) == 0 || len(e.Raw) >= len(c.body) || !strings.HasPrefix(c.body, string(e.Raw)) {
			t.Errorf("%s: dead letter of %d bytes is not the head of the %d byte message", subject, len(e.Raw), len(c.body))
		}
	}
	waitFor(t, func() bool {
		info := must(must(g.js.Stream(context.Background(), protocol.StreamCalls)).Info(context.Background()))
		return info.State.Msgs == 0
	}, "the work queue to empty")
}

func TestHugeCatalogReplies(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	lib, err := skills.Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	huge := tool.NewCategory("huge", tool.Must(tool.Def[struct{}]{
		Spec:    tool.Spec{Name: "huge", Description: strings.Repeat("d", 1<<20)},
		Execute: func(context.Context, struct{}) (tool.Result, error) { return tool.Result{}, nil },
	}))
	startWorker(t, s, testConfig(), skills.Category(lib), huge)
	g := newGateway(t, s)

	// 110,000 unknown skill names: the notes are capped.
	const n = 110000
	names := make([]string, n)
	for i := range names {
		names[i] = strconv.FormatInt(int64(i), 36)
	}
	req, _ := json.Marshal(protocol.CatalogRequest{AgentID: "a", TurnID: "t", Context: protocol.Context{Kind: protocol.KindText, Skills: names}})
	m, err := g.nc.Request(protocol.SubjectTools, req, 20*time.Second)
	if err != nil {
		t.Fatalf("no reply to %d skill names: %v", n, err)
	}
	var reply protocol.CatalogReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		t.Fatalf("reply %.300s: %v", m.Data, err)
	}
	if len(reply.Notes) != wire.MaxNotes+1 || reply.Notes[wire.MaxNotes] != fmt.Sprintf("and %d more", n-wire.MaxNotes) {
		t.Errorf("%d notes, last %q", len(reply.Notes), reply.Notes[len(reply.Notes)-1])
	}

	// A catalog larger than one message: an error reply that says so.
	req, _ = json.Marshal(protocol.CatalogRequest{AgentID: "a", TurnID: "t", Context: protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{"huge": true}}})
	m, err = g.nc.Request(protocol.SubjectTools, req, 20*time.Second)
	if err != nil {
		t.Fatalf("no reply for a huge catalog: %v", err)
	}
	if code, desc := m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader); code != "413" || !strings.Contains(desc, "over the") {
		t.Errorf("reply code %q, description %q", code, desc)
	}
}

func TestBadCatalogRequestErrorIsBounded(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig())
	g := newGateway(t, s)
	// The error quotes the agent id: 900 KB of it would not fit a header.
	req := `{"agent_id":"` + strings.Repeat("!", 900<<10) + `","turn_id":"t","context":{"kind":"text"}}`
	m, err := g.nc.Request(protocol.SubjectTools, []byte(req), 10*time.Second)
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	if code, desc := m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader); code != "400" || len(desc) > wire.MaxErrorBytes || !strings.Contains(desc, "agent_id") {
		t.Errorf("reply code %q, description of %d bytes: %.200q", code, len(desc), desc)
	}
}

func TestReusedCallIDIsNotAnsweredWithTheOldOutcome(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	subject := protocol.Subject(protocol.PrefixCall, "a", "t")
	g.publish(subject, "a.t.0", step("a", "t", 0, fc("c1", "ping", `{"note":"first"}`)))
	outputs, first := evs.untilDone()
	if outputs["c1"].Status != protocol.StatusOK {
		t.Fatalf("first: %s", outputs["c1"].Raw)
	}

	// The gateway re-sends step 0 (under another message id) with c1 now
	// asking for something else, and a new call c2.
	g.publish(subject, "a.t.0.again", step("a", "t", 0, fc("c1", "ping", `{"note":"second"}`), fc("c2", "ping", `{"note":"new"}`)))
	outputs, done := evs.untilDone()
	c1, c2 := outputs["c1"], outputs["c2"]
	if c1.Error == nil || c1.Error.Kind != string(tool.InvalidArguments) || !strings.Contains(c1.Error.Message, "already used") || !strings.Contains(c1.Error.Message, "new call id") {
		t.Errorf("reused c1 answered %s", c1.Raw)
	}
	if strings.Contains(string(c1.Raw), "first") {
		t.Errorf("reused c1 answered with the old outcome: %s", c1.Raw)
	}
	if c2.Status != protocol.StatusOK {
		t.Errorf("c2: %s", c2.Raw)
	}
	if len(done.Items) != 2 {
		t.Fatalf("step.done has %d items", len(done.Items))
	}
	firstID, doneID := first.Header.Get("Nats-Msg-Id"), done.Header.Get("Nats-Msg-Id")
	if firstID != "a.t.0.done" || !strings.HasPrefix(doneID, "a.t.0~") || !strings.HasSuffix(doneID, ".done") {
		t.Errorf("step.done ids %q then %q", firstID, doneID)
	}
	if id := c1.Header.Get("Nats-Msg-Id"); !strings.HasPrefix(id, "a.t.0~") {
		t.Errorf("reused call's call.output id %q is not versioned", id)
	}

	// Step 0 once more with new call ids only: the new call runs and
	// reports, but nothing tells this version from a redelivery, so its
	// step.done is the one already stored (docs/protocol.md).
	g.publish(subject, "a.t.0.third", step("a", "t", 0, fc("c3", "ping", `{"note":"third"}`)))
	if ev := evs.next(); ev.Type != protocol.EventCallOutput || ev.CallID != "c3" || ev.Status != protocol.StatusOK {
		t.Errorf("third version: %s", ev.Raw)
	}
	evs.quiet(500 * time.Millisecond)

	// The first version again (a redelivery, as far as the worker can
	// tell): answered from the journal, so its events are the stored ones
	// and nothing new appears.
	g.publish(subject, "a.t.0.fourth", step("a", "t", 0, fc("c1", "ping", `{"note":"first"}`)))
	evs.quiet(time.Second)
}

func TestDeadLetterWaitsForItsStream(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	cfg := testConfig()
	startWorker(t, s, cfg)
	g := newGateway(t, s)
	ctx := context.Background()
	// The dead-letter stream is gone (an operator's mistake, a stream
	// being moved): the copy fails, is retried, and the step stays.
	if err := g.js.DeleteStream(ctx, protocol.StreamDead); err != nil {
		t.Fatal(err)
	}
	g.publish("turn.call.a.lost", "", "not a step")
	waitFor(t, func() bool {
		c := must(g.js.Consumer(ctx, protocol.StreamCalls, protocol.ConsumerCalls))
		info := must(c.Info(ctx))
		return info.Delivered.Consumer > 0
	}, "the step to be delivered")
	if info := must(must(g.js.Stream(ctx, protocol.StreamCalls)).Info(ctx)); info.State.Msgs != 1 {
		t.Fatalf("the step left the work queue without its dead letter: %d messages", info.State.Msgs)
	}
	for _, sc := range cfg.Topology.WithDefaults().Streams() {
		if sc.Name == protocol.StreamDead {
			if _, err := g.js.CreateStream(ctx, sc); err != nil {
				t.Fatal(err)
			}
		}
	}
	dead := g.watchSubject(protocol.StreamDead, protocol.PrefixDead+".>")
	e := dead.next()
	if string(e.Raw) != "not a step" || !strings.Contains(e.Header.Get(protocol.HeaderDeadReason), "not a JSON step object") {
		t.Errorf("dead letter %q, reason %q", e.Raw, e.Header.Get(protocol.HeaderDeadReason))
	}
	waitFor(t, func() bool {
		info := must(must(g.js.Stream(ctx, protocol.StreamCalls)).Info(ctx))
		return info.State.Msgs == 0
	}, "the work queue to empty")
}

// TestReadOnlyCallIsJournaledWithOneWrite: a read-only call on its
// step's first delivery writes its call key once, after it ran (no claim
// before), and the step sent again is answered with the stored outcome:
// nothing new reaches the gateway and the key is not written again.
func TestReadOnlyCallIsJournaledWithOneWrite(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	subject := protocol.Subject(protocol.PrefixCall, "a", "t")
	g.publish(subject, "a.t.0", step("a", "t", 0, fc("c1", "ping", `{"note":"first"}`)))
	if outputs, _ := evs.untilDone(); outputs["c1"].Status != protocol.StatusOK {
		t.Fatalf("c1: %s", outputs["c1"].Raw)
	}
	ctx := context.Background()
	key := "$KV." + protocol.BucketState + "." + protocol.CallKey("a", "t", 0, "c1")
	writes := func() uint64 {
		info := must(must(g.js.Stream(ctx, "KV_"+protocol.BucketState)).Info(ctx, jetstream.WithSubjectFilter(key)))
		return info.State.Subjects[key]
	}
	if n := writes(); n != 1 {
		t.Fatalf("the read-only call's key was written %d times, want 1", n)
	}
	g.publish(subject, "a.t.0.again", step("a", "t", 0, fc("c1", "ping", `{"note":"first"}`)))
	evs.quiet(time.Second)
	if n := writes(); n != 1 {
		t.Fatalf("after the step was sent again the key was written %d times, want 1", n)
	}
}
