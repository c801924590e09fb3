package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/wire"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Probes of the size limits from outside, beyond the cases the issue
// lists (docs/protocol.md, "Size limits" and "Reused call ids"): every
// step ends with a step.done or a dead letter with its reason, every
// event is valid JSON and UTF-8 within the max payload.

type uniParams struct {
	KB int `json:"kb" jsonschema:"minimum=1,maximum=4096"`
}

// uniPiece is text that every clip must cut between characters: CJK,
// an emoji (4 bytes), characters encoding/json escapes (<, >, &, U+2028,
// a NUL), quotes and an invalid byte.
const uniPiece = "日本語のテキスト😀<&>\u2028\x00\"\\\xff"

// uniCategory offers "uni", which returns kb KiB of uniPiece starting with
// HEAD and ending with TAIL, and as much again in its details.
func uniCategory() tool.Category {
	uni := tool.Must(tool.Def[uniParams]{
		Spec: tool.Spec{Name: "uni", Description: "returns kb KiB of unicode", ExecutionMode: tool.Parallel, ReadOnly: true},
		Execute: func(_ context.Context, p uniParams) (tool.Result, error) {
			body := "HEAD" + strings.Repeat(uniPiece, p.KB*1024/len(uniPiece)) + "TAIL"
			return tool.Result{Content: body, Details: map[string]any{"copy": body, "list": strings.Split(body[:min(len(body), 200<<10)], "😀")}}, nil
		},
	})
	ts := []*tool.Tool{uni}
	return tool.Category{Name: "uni", Tools: func(context.Context, tool.Turn) ([]*tool.Tool, error) { return ts, nil }}
}

// checkEvent fails the test unless raw is valid JSON, valid UTF-8, and
// no larger than limit with its headers.
func checkEvent(t *testing.T, ev event, limit int) {
	t.Helper()
	if !utf8.Valid(ev.Raw) || !json.Valid(ev.Raw) {
		t.Fatalf("%s event is not valid UTF-8 JSON: %.300q", ev.Type, ev.Raw)
	}
	hdr := 0
	for k, vs := range ev.Header {
		for _, v := range vs {
			hdr += len(k) + len(v) + 4
		}
	}
	if len(ev.Raw)+hdr > limit {
		t.Errorf("%s event of %d bytes with %d of headers, over %d", ev.Type, len(ev.Raw), hdr, limit)
	}
}

func TestProbeUnicodeOutputsAreClippedBetweenCharacters(t *testing.T) {
	t.Parallel()
	// A 256 KiB max payload, not the default 1 MiB: what is clipped and
	// where scales with the limit (the worker reads it from the server),
	// and building and escaping the text under -race is what costs, four
	// times as much at 1 MiB.
	const limit = 256 << 10
	s := smallServer(t, limit)
	cfg := testConfig()
	cfg.Topology.MaxMsgSize = limit
	startWorker(t, s, cfg, uniCategory())
	g := newGateway(t, s)
	if got := maxPayload(t, g); got != limit {
		t.Fatalf("max payload %d", got)
	}
	// Each case is over the max payload where it must be clipped, and no
	// bigger: one output of 300 KiB (clipped in its call.output and its
	// item), 40 outputs of 8 KiB (each call.output whole, step.done's 40
	// items share 256 KiB), 7 of 65 KiB (each whole, 455 KiB of items,
	// more than three of them cannot fit).
	for n, c := range []struct{ calls, kb int }{{1, 300}, {40, 8}, {7, 65}} {
		evs := g.watch("a", fmt.Sprint("t", n))
		var calls []call
		for i := range c.calls {
			calls = append(calls, fc(fmt.Sprintf("c%02d", i), "uni", fmt.Sprintf(`{"kb":%d}`, c.kb)))
		}
		g.sendStep("a", fmt.Sprint("t", n), 0, calls...)
		outputs, done := evs.untilDone()
		if len(outputs) != c.calls || len(done.Items) != c.calls {
			t.Fatalf("%d calls: %d outputs, %d items", c.calls, len(outputs), len(done.Items))
		}
		checkEvent(t, done, limit)
		for _, ev := range outputs {
			checkEvent(t, ev, limit)
			if ev.Status != protocol.StatusOK {
				t.Errorf("%s: %.300s", ev.CallID, ev.Raw)
			}
		}
		for i, raw := range done.Items {
			_, out := itemOutput(t, raw)
			if !strings.HasPrefix(out, "HEAD") || !strings.HasSuffix(out, "TAIL") {
				t.Errorf("%d calls: item %d lost its head or tail: %.100q…%.100q", c.calls, i, out, out[max(0, len(out)-100):])
			}
			// Every piece between the head, the note and the tail is made
			// of whole characters (the invalid byte became U+FFFD).
			if strings.ContainsRune(out, utf8.RuneError) && !strings.Contains(out, "\ufffd") {
				t.Errorf("item %d has a broken character", i)
			}
		}
	}
}

func TestProbeLongCallIDs(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	// 256-byte call ids, some of multi-byte characters, ending in a space
	// (a header value keeps it), to an unknown tool and to ping.
	const n = 2000
	var calls []call
	ids := make([]string, n)
	for i := range n {
		id := fmt.Sprintf("%06d-", i)
		if i%2 == 0 {
			id += strings.Repeat("é", (256-len(id)-1)/2)
		}
		id += strings.Repeat("x", 256-len(id)-1) + " "
		ids[i] = id
		name := "nosuch"
		if i%100 == 0 {
			name = "ping"
		}
		calls = append(calls, fc(id, name, "{}"))
	}
	// Two ids that differ only by a trailing space are two calls.
	calls = append(calls, fc("tail", "ping", "{}"), fc("tail ", "ping", "{}"))
	ids = append(ids, "tail", "tail ")
	g.sendStep("a", "t", 0, calls...)
	outputs, done := evs.untilDone()
	if len(outputs) != len(calls) || len(done.Items) != len(calls) {
		t.Fatalf("%d call.output events and %d step.done items, want %d each", len(outputs), len(done.Items), len(calls))
	}
	checkEvent(t, done, maxPayload(t, g))
	for i, raw := range done.Items {
		if id, _ := itemOutput(t, raw); id != ids[i] {
			t.Fatalf("item %d is for %q, want %q", i, id, ids[i])
		}
	}
}

func TestProbeHugeNameAndNamespace(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	huge := strings.Repeat("ñ<", 40<<10)
	g.sendStep("a", "t", 0, call{id: "c1", name: huge, ns: huge, args: "{}"}, fc("c2", "ping", "{}"))
	outputs, done := evs.untilDone()
	checkEvent(t, done, maxPayload(t, g))
	ev := outputs["c1"]
	checkEvent(t, ev, maxPayload(t, g))
	if ev.Error == nil || ev.Error.Kind != string(tool.UnknownTool) {
		t.Fatalf("c1: %.300s", ev.Raw)
	}
	// The name is in the event (name, namespace) but not echoed again in
	// the text for the model.
	if _, out := itemOutput(t, ev.Item); len(out) > 2<<10 || len(ev.Error.Message) > 2<<10 {
		t.Errorf("an unknown tool's output is %d bytes, its message %d", len(out), len(ev.Error.Message))
	}
	if outputs["c2"].Status != protocol.StatusOK {
		t.Errorf("c2: %.300s", outputs["c2"].Raw)
	}
}

func TestProbeStepAtTheStreamLimit(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	dead := g.watchSubject(protocol.StreamDead, protocol.PrefixDead+".>")
	// A valid step whose body and headers are exactly the stream's limit
	// (1 MiB, the default max payload too): prose pads it.
	subject, msgID := protocol.Subject(protocol.PrefixCall, "a", "t"), "a.t.0"
	body := func(pad int) []byte {
		st := step("a", "t", 0, fc("c1", "ping", "{}"))
		st["output"] = append(st["output"].([]any), map[string]any{"type": "message", "content": strings.Repeat("p", pad)})
		return must(json.Marshal(st))
	}
	hdr := len("NATS/1.0\r\n\r\n") + len(jetstream.MsgIDHeader+": "+msgID+"\r\n")
	pad := 1<<20 - hdr - len(body(0))
	data := body(pad)
	if len(data)+hdr != 1<<20 {
		t.Fatalf("step of %d bytes", len(data)+hdr)
	}
	g.publish(subject, msgID, data)
	outputs, done := evs.untilDone()
	if outputs["c1"].Status != protocol.StatusOK || len(done.Items) != 1 {
		t.Fatalf("step at the limit: %s / %s", outputs["c1"].Raw, done.Raw)
	}
	dead.quiet(200 * time.Millisecond)
}

func TestProbeHugeAndManyHeaders(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	limit := maxPayload(t, g)
	for n, h := range []nats.Header{
		// The server takes at most 64 KiB of headers on a stream.
		{"traceparent": {strings.Repeat("garbage-", 7<<10)}},
		{"traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, "tracestate": {strings.Repeat("k=v,", 7<<10)}, "baggage": {strings.Repeat("key=value,", 3<<10)}},
		func() nats.Header {
			h := nats.Header{"traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
			var members []string
			for i := range 32 {
				members = append(members, fmt.Sprintf("k%d=%s", i, strings.Repeat("v", 250)))
			}
			h.Set("tracestate", strings.Join(members, ","))
			var bag []string
			for i := range 64 {
				bag = append(bag, fmt.Sprintf("b%d=%s", i, strings.Repeat("w", 120)))
			}
			h.Set("baggage", strings.Join(bag, ","))
			for i := range 400 {
				h.Set(fmt.Sprintf("X-Junk-%d", i), strings.Repeat("j", 100))
			}
			return h
		}(),
	} {
		m := natsMsg(t, protocol.Subject(protocol.PrefixCall, "a", "t"), step("a", "t", n, fc("c1", "ping", "{}")))
		m.Header = h
		m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID("a", "t", int64(n)))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := g.js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("headers %d: %v", n, err)
		}
		cancel()
		outputs, done := evs.untilDone()
		if outputs["c1"].Status != protocol.StatusOK {
			t.Errorf("headers %d: %.300s", n, outputs["c1"].Raw)
		}
		checkEvent(t, done, limit)
		checkEvent(t, outputs["c1"], limit)
	}
}

func TestProbeCancelThatIsNotJSON(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	for _, body := range [][]byte{[]byte("{not json" + strings.Repeat("x", 900<<10)), []byte(`{"reason":42}`), nil} {
		if err := g.nc.Publish(protocol.Subject(protocol.PrefixCancel, "a", "t"), body); err != nil {
			t.Fatal(err)
		}
	}
	kv := must(g.js.KeyValue(context.Background(), protocol.BucketState))
	waitFor(t, func() bool {
		_, err := kv.Get(context.Background(), protocol.TurnKey("a", "t", "cancel"))
		return err == nil
	}, "the cancel mark")
	g.sendStep("a", "t", 0, fc("c1", "ping", "{}"))
	outputs, done := evs.untilDone()
	if ev := outputs["c1"]; ev.Error == nil || ev.Error.Kind != string(tool.Aborted) || !done.EndTurn {
		t.Errorf("after a cancel that is not JSON: %.300s / end_turn %v", ev.Raw, done.EndTurn)
	}
}

func TestProbeCatalogWithAGiantContext(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	c := protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{diagnostics.Binding: true}}
	for i := range 20000 {
		c.Bindings[fmt.Sprintf("binding-%d", i)] = true
	}
	for i := range 1000 {
		c.MCPServers = append(c.MCPServers, fmt.Sprintf("server-%d-%s", i, strings.Repeat("m", 200)))
		c.Skills = append(c.Skills, fmt.Sprintf("skill-%d-%s", i, strings.Repeat("s", 200)))
	}
	req := must(json.Marshal(protocol.CatalogRequest{AgentID: "a", TurnID: "t", Context: c}))
	m, err := g.nc.Request(protocol.SubjectTools, req, 10*time.Second)
	if err != nil {
		t.Fatalf("no reply to a %d byte catalog request: %v", len(req), err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("error reply %s: %s", code, m.Header.Get(micro.ErrorHeader))
	}
	var reply protocol.CatalogReply
	if err := json.Unmarshal(m.Data, &reply); err != nil || !strings.Contains(string(reply.Tools), `"ping"`) {
		t.Fatalf("reply %.300s: %v", m.Data, err)
	}
	if len(reply.Notes) > wire.MaxNotes+1 {
		t.Errorf("%d notes", len(reply.Notes))
	}
	// The same context in a step: the step runs.
	evs := g.watch("a", "t")
	st := step("a", "t", 0, fc("c1", "ping", "{}"))
	st["context"] = c
	g.publish(protocol.Subject(protocol.PrefixCall, "a", "t"), "a.t.0", st)
	outputs, _ := evs.untilDone()
	if outputs["c1"].Status != protocol.StatusOK {
		t.Errorf("c1: %.300s", outputs["c1"].Raw)
	}
}

func TestProbeReusedCallIDWithAnotherTool(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	subject := protocol.Subject(protocol.PrefixCall, "a", "t")
	g.publish(subject, "a.t.0", step("a", "t", 0, fc("c1", "ping", `{}`)))
	if outputs, _ := evs.untilDone(); outputs["c1"].Status != protocol.StatusOK {
		t.Fatalf("first: %s", outputs["c1"].Raw)
	}
	// Same id and arguments, another tool: not the same call.
	g.publish(subject, "a.t.0.b", step("a", "t", 0, fc("c1", "sleep", `{}`)))
	outputs, done := evs.untilDone()
	if ev := outputs["c1"]; ev.Error == nil || ev.Error.Kind != string(tool.InvalidArguments) || !strings.Contains(ev.Error.Message, "already used") {
		t.Errorf("c1 as another tool: %s", ev.Raw)
	}
	if len(done.Items) != 1 {
		t.Errorf("step.done %s", done.Raw)
	}
	// That version again, exactly (a redelivery of it): nothing new.
	g.publish(subject, "a.t.0.c", step("a", "t", 0, fc("c1", "sleep", `{}`)))
	evs.quiet(time.Second)
}

// smallServer is an embedded server whose max payload is n bytes.
func smallServer(t *testing.T, n int32) *natstest.Server {
	return natstest.StartWith(t, func(o *server.Options) { o.MaxPayload = n })
}

func TestProbeSmallMaxPayload(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	s := smallServer(t, limit)
	cfg := testConfig()
	cfg.Topology.MaxMsgSize = limit
	startWorker(t, s, cfg, sizeCategory(), uniCategory(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	if got := maxPayload(t, g); got != limit {
		t.Fatalf("max payload %d", got)
	}
	evs := g.watch("a", "t")
	dead := g.watchSubject(protocol.StreamDead, protocol.PrefixDead+".>")

	// 20 outputs of 20 KiB, and unicode: clipped to fit 64 KiB.
	var calls []call
	for i := range 20 {
		calls = append(calls, fc(fmt.Sprintf("b%02d", i), "big", `{"kb":20}`), fc(fmt.Sprintf("u%02d", i), "uni", `{"kb":30}`))
	}
	g.sendStep("a", "t", 0, calls...)
	outputs, done := evs.untilDone()
	if len(outputs) != 40 || len(done.Items) != 40 {
		t.Fatalf("%d outputs, %d items", len(outputs), len(done.Items))
	}
	checkEvent(t, done, limit)
	for _, ev := range outputs {
		checkEvent(t, ev, limit)
	}

	// 500 unknown calls: their notes are clipped to fit.
	calls = nil
	for i := range 500 {
		calls = append(calls, fc(fmt.Sprintf("n%03d", i), "nosuch", "{}"))
	}
	g.sendStep("a", "t", 1, calls...)
	outputs, done = evs.untilDone()
	if len(outputs) != 500 || len(done.Items) != 500 {
		t.Fatalf("%d outputs, %d items", len(outputs), len(done.Items))
	}
	checkEvent(t, done, limit)
	// 1000: more than 64 KiB even as notes, so the step is refused
	// before anything runs, with its reason.
	calls = nil
	for i := range 700 {
		calls = append(calls, fc(fmt.Sprintf("n%03d", i), "nosuch", "{}"))
	}
	g.sendStep("a", "t", 2, calls...)
	e := dead.next()
	if r := e.Header.Get(protocol.HeaderDeadReason); !strings.Contains(r, "send fewer calls per step") {
		t.Errorf("reason %q", r)
	}

	// Garbage at the limit: dead-lettered as its head.
	g.publish("turn.call.a.junk", "", []byte(strings.Repeat("z", limit-100)))
	e = dead.next()
	if e.Header.Get(protocol.HeaderDeadTruncated) != "true" || !strings.Contains(e.Header.Get(protocol.HeaderDeadReason), "not a JSON step object") {
		t.Errorf("garbage dead letter headers %v", e.Header)
	}

	// A catalog larger than 64 KiB: an error reply that says so.
	c := protocol.Context{Kind: protocol.KindText}
	m, err := g.nc.Request(protocol.SubjectTools, must(json.Marshal(protocol.CatalogRequest{AgentID: "a", TurnID: "t", Context: c})), 10*time.Second)
	if err != nil {
		t.Fatalf("catalog: %v", err)
	}
	_ = m
	waitFor(t, func() bool {
		info := must(must(g.js.Stream(context.Background(), protocol.StreamCalls)).Info(context.Background()))
		return info.State.Msgs == 0
	}, "the work queue to empty")
}

func TestProbeDeadLetterStreamFull(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	cfg := testConfig()
	startWorker(t, s, cfg)
	g := newGateway(t, s)
	ctx := context.Background()
	// TURN_DEAD takes one message and refuses the next.
	st := must(g.js.Stream(ctx, protocol.StreamDead))
	sc := st.CachedInfo().Config
	sc.MaxMsgs, sc.Discard = 1, jetstream.DiscardNew
	if _, err := g.js.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	g.publish("turn.call.a.first", "", "first garbage")
	waitFor(t, func() bool { return must(must(g.js.Stream(ctx, protocol.StreamDead)).Info(ctx)).State.Msgs == 1 }, "the first dead letter")
	g.publish("turn.call.a.second", "", "second garbage")
	waitFor(t, func() bool {
		info := must(must(g.js.Consumer(ctx, protocol.StreamCalls, protocol.ConsumerCalls)).Info(ctx))
		return info.Delivered.Stream >= 2
	}, "the second step to be delivered")
	// Not lost: it stays in the work queue while its copy is refused.
	time.Sleep(500 * time.Millisecond)
	if n := must(must(g.js.Stream(ctx, protocol.StreamCalls)).Info(ctx)).State.Msgs; n != 1 {
		t.Fatalf("%d steps in the work queue, want the second one", n)
	}
	// Room again: the dead letter lands and the step leaves.
	sc.MaxMsgs = -1
	if _, err := g.js.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return must(must(g.js.Stream(ctx, protocol.StreamDead)).Info(ctx)).State.Msgs == 2 }, "the second dead letter")
	waitFor(t, func() bool { return must(must(g.js.Stream(ctx, protocol.StreamCalls)).Info(ctx)).State.Msgs == 0 }, "the work queue to empty")
}

func TestProbeDeadLetterOfAStepWithJetStreamHeaders(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	startWorker(t, s, testConfig())
	g := newGateway(t, s)
	dead := g.watchSubject(protocol.StreamDead, protocol.PrefixDead+".>")
	ctx := context.Background()
	// Headers that the server acts on when the gateway publishes the
	// step: on the dead letter's own publish they would refuse it.
	m := nats.NewMsg("turn.call.a.hdr")
	m.Data = []byte("not a step")
	m.Header.Set("Nats-Expected-Stream", protocol.StreamCalls)
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", "0")
	m.Header.Set("Nats-Msg-Id", "gateway-id")
	if _, err := g.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	e := dead.next()
	if !strings.Contains(e.Header.Get(protocol.HeaderDeadReason), "not a JSON step object") || string(e.Raw) != "not a step" {
		t.Errorf("dead letter %q with headers %v", e.Raw, e.Header)
	}
	if got := e.Header.Get("Dead-Nats-Expected-Stream"); got != protocol.StreamCalls {
		t.Errorf("the original's Nats-Expected-Stream is not kept as Dead-Nats-Expected-Stream: %v", e.Header)
	}
	waitFor(t, func() bool {
		return must(must(g.js.Stream(ctx, protocol.StreamCalls)).Info(ctx)).State.Msgs == 0
	}, "the work queue to empty")
}

func TestProbeToolSearchOfHugeDefinitions(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	var ts []*tool.Tool
	for i := range 6 {
		size := 300 << 10
		if i == 5 {
			size = 1 << 10
		}
		ts = append(ts, tool.Must(tool.Def[struct{}]{
			Spec:    tool.Spec{Name: fmt.Sprintf("widget_%d", i), Description: "widget tool " + strings.Repeat("w ", size/2), DeferLoading: true, ReadOnly: true},
			Execute: func(context.Context, struct{}) (tool.Result, error) { return tool.Result{Content: "ok"}, nil },
		}))
	}
	deferred := tool.Category{Name: "test", Tools: func(context.Context, tool.Turn) ([]*tool.Tool, error) { return ts, nil }}
	startWorker(t, s, testConfig(), deferred)
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	st := step("a", "t", 0)
	st["output"] = append(st["output"].([]any), map[string]any{"type": "tool_search_call", "call_id": "s1", "execution": "client", "arguments": map[string]any{"query": "widget"}})
	g.publish(protocol.Subject(protocol.PrefixCall, "a", "t"), "a.t.0", st)
	outputs, done := evs.untilDone()
	checkEvent(t, done, maxPayload(t, g))
	ev := outputs["s1"]
	checkEvent(t, ev, maxPayload(t, g))
	var item protocol.ToolSearchOutput
	if err := json.Unmarshal(ev.Item, &item); err != nil || len(item.Tools) == 0 {
		t.Fatalf("tool search output %.300s: %v", ev.Item, err)
	}
}

func TestProbeSmallMaxPayloadWithDefaultTopology(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	s := smallServer(t, limit)
	startWorker(t, s, testConfig(), sizeCategory())
	g := newGateway(t, s)
	evs := g.watch("a", "t")
	var calls []call
	for i := range 8 {
		calls = append(calls, fc(fmt.Sprintf("b%d", i), "big", `{"kb":40}`))
	}
	g.sendStep("a", "t", 0, calls...)
	outputs, done := evs.untilDone()
	if len(outputs) != 8 || len(done.Items) != 8 {
		t.Fatalf("%d outputs, %d items", len(outputs), len(done.Items))
	}
	checkEvent(t, done, limit)
}
