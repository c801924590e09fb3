package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// inputServer is a 2026-07-28 (stateless) MCP server whose create_issue
// asks for a repository, then, when told "again", for a label, and
// records the requestState and responses each retry brought.
type inputServer struct {
	*httptest.Server
	mu    sync.Mutex
	seen  []string // "<requestState>|<responses as JSON>" per call
	calls int
}

func startInputServer(t *testing.T) *inputServer { return startInputServerWith(t, true) }

// startInputServerWith serves 2026-07-28 when stateless; a stateful one
// speaks 2025-11-25 to this client, and the SDK turns its input requests
// into elicitation/create requests inside the call.
func startInputServerWith(t *testing.T, stateless bool) *inputServer {
	t.Helper()
	is := &inputServer{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "input-server", Version: "1"}, nil)
	repoSchema := map[string]any{"type": "object", "properties": map[string]any{
		"repo": map[string]any{"type": "string"}, "private": map[string]any{"type": "boolean", "default": true}}, "required": []any{"repo"}}
	srv.AddTool(&sdk.Tool{Name: "create_issue", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var args struct{ Title string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			resp, _ := json.Marshal(req.Params.InputResponses)
			is.mu.Lock()
			is.calls++
			is.seen = append(is.seen, req.Params.RequestState+"|"+string(resp))
			is.mu.Unlock()
			answer := func(id string) (string, map[string]any) {
				r, ok := req.Params.InputResponses[id].(*sdk.ElicitResult)
				if !ok {
					return "", nil
				}
				return r.Action, r.Content
			}
			switch req.Params.RequestState {
			case "":
				return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"repo": &sdk.ElicitParams{Message: "Which repository?", RequestedSchema: repoSchema}},
					RequestState: "state-1:" + args.Title}, nil
			case "state-1:" + args.Title:
				action, content := answer("repo")
				if action != "accept" {
					return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "not created: the person said " + action}}}, nil
				}
				if content["repo"] == "again" {
					return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"label": &sdk.ElicitParams{Message: "Which label?",
						RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"label": map[string]any{"type": "string"}}}}}, RequestState: "state-2"}, nil
				}
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("created %q in %v (private %v)", args.Title, content["repo"], content["private"])}}}, nil
			case "state-2":
				_, content := answer("label")
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("created %q with label %v", args.Title, content["label"])}}}, nil
			}
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "unknown state " + req.Params.RequestState}}}, nil
		})
	// survey elicits twice inside one call (2025-11-25 only).
	srv.AddTool(&sdk.Tool{Name: "survey", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var got []string
			for _, q := range []string{"Which repository?", "Which label?"} {
				res, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: q, RequestedSchema: repoSchema})
				if err != nil {
					return nil, err
				}
				b, _ := json.Marshal(res.Content)
				got = append(got, res.Action+" "+string(b))
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Join(got, "; ")}}}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "echo", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var args struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: args.Text}}}, nil
		})
	is.Server = httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(is.Close)
	return is
}

func (is *inputServer) log() []string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return append([]string(nil), is.seen...)
}

// startInputWorker runs a worker on s with the MCP category; stop ends
// it and waits.
func startInputWorker(t *testing.T, s *natstest.Server, name string, servers map[string]mcp.ServerConfig) (stop func()) {
	return startInputWorkerWith(t, s, name, servers, 0)
}

// startInputWorkerWith sets the approval timeout (0: the default).
func startInputWorkerWith(t *testing.T, s *natstest.Server, name string, servers map[string]mcp.ServerConfig, timeout time.Duration) (stop func()) {
	t.Helper()
	m := newManager(t, servers)
	nc := s.Connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := engine.Config{Name: name, Grace: 5 * time.Second, CallTimeout: 30 * time.Second,
		Topology: bus.Topology{AckWait: 2 * time.Second, MaxDeliver: 3}, Approval: turn.Policy{Timeout: timeout}}
	w, err := engine.New(ctx, nc, cfg, turn.NewAssembler(mcp.Category(m, nil)), nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker %s: %v", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("worker %s did not stop", name)
		}
	}
	t.Cleanup(stop)
	return stop
}

// pendingEvent is a step.pending as a gateway reads it.
type pendingEvent struct {
	protocol.StepPending
	msgID string
}

// inputWatch reads a turn's events with their message ids.
func inputWatch(t *testing.T, js jetstream.JetStream, subject string) <-chan jetstream.Msg {
	t.Helper()
	c, err := js.OrderedConsumer(context.Background(), streamOf(subject), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan jetstream.Msg, 100)
	cc, err := c.Consume(func(m jetstream.Msg) { ch <- m })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return ch
}

func streamOf(subject string) string {
	if strings.HasPrefix(subject, "turn.dead.") {
		return "TURN_DEAD"
	}
	return protocol.StreamOutputs
}

func next(t *testing.T, ch <-chan jetstream.Msg) (string, map[string]json.RawMessage, jetstream.Msg) {
	t.Helper()
	select {
	case m := <-ch:
		var v map[string]json.RawMessage
		_ = json.Unmarshal(m.Data(), &v)
		var typ string
		_ = json.Unmarshal(v["type"], &typ)
		return typ, v, m
	case <-time.After(60 * time.Second):
		t.Fatal("no event")
	}
	return "", nil, nil
}

func decide(t *testing.T, js jetstream.JetStream, turnID string, step int64, n int, d ...protocol.Decision) {
	t.Helper()
	body, _ := json.Marshal(protocol.Approval{AgentID: "a1", TurnID: turnID, Step: step, Decisions: d})
	m := nats.NewMsg(protocol.Subject(protocol.PrefixApproval, "a1", turnID))
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, protocol.ApprovalMsgID("a1", turnID, step, n))
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// TestInputRequestResumedByAnotherWorker: a 2026-07-28 server's
// input_required holds its call like an approval, mid-run: the step's
// other call ends and is reported, the held call's output and step.done
// wait, and a step.pending with reason "input" and the request goes out.
// The worker that held it stops; an input that does not fit the
// requested schema is dead-lettered; a valid one resumes the call on a
// second worker, which echoes the server's requestState; the server asks
// again, which holds the step again (.pending.2); the second answer
// finishes the call, then step.done with both outputs in call order.
func TestInputRequestResumedByAnotherWorker(t *testing.T) {
	t.Parallel()
	is := startInputServer(t)
	servers := map[string]mcp.ServerConfig{"gh": {URL: is.URL, Defer: new(false)}}
	s := natstest.Start(t)
	stopA := startInputWorker(t, s, "wa", servers)
	nc := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, nc: nc, js: js}
	ctx := protocol.Context{Kind: protocol.KindText, MCPServers: []string{"gh"}}
	r.catalog(ctx) // the worker is up
	out := inputWatch(t, js, protocol.Subject(protocol.PrefixOutput, "a1", "ti"))
	dead := inputWatch(t, js, "turn.dead.>")

	r.send("ti", 0, ctx, call("c1", "gh", "create_issue", `{"title":"bug"}`), call("c2", "gh", "echo", `{"text":"beside"}`))
	typ, v, _ := next(t, out)
	if typ != protocol.EventCallOutput || !strings.Contains(string(v["call_id"]), "c2") {
		t.Fatalf("first event %s %s", typ, v["call_id"])
	}
	typ, _, m := next(t, out)
	if typ != protocol.EventStepPending || m.Headers().Get(jetstream.MsgIDHeader) != "a1.ti.0.pending" {
		t.Fatalf("second event %s %s", typ, m.Data())
	}
	var p protocol.StepPending
	if err := json.Unmarshal(m.Data(), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Approvals) != 1 || p.Approvals[0].CallID != "c1" || p.Approvals[0].Reason != protocol.PendingInput ||
		p.Approvals[0].InputRequest == nil || p.Approvals[0].InputRequest.Message != "Which repository?" ||
		!strings.Contains(string(p.Approvals[0].InputRequest.RequestedSchema), `"required":["repo"]`) || string(p.Approvals[0].Arguments) != `{"title":"bug"}` {
		t.Fatalf("step.pending %s", m.Data())
	}

	// The worker that held the call goes away; nothing of the call lives
	// in a process now.
	stopA()
	startInputWorker(t, s, "wb", servers)

	decide(t, js, "ti", 0, 1, protocol.Decision{CallID: "c1", Approved: true, Input: json.RawMessage(`{"repo":5}`)})
	_, _, dm := next(t, dead)
	if reason := dm.Headers().Get("Dead-Reason"); !strings.Contains(reason, "not valid against its requested_schema") {
		t.Errorf("dead letter's reason %q", reason)
	}
	decide(t, js, "ti", 0, 2, protocol.Decision{CallID: "c1", Approved: true, Input: json.RawMessage(`{"repo":"again"}`)})
	typ, _, m = next(t, out)
	if typ != protocol.EventStepPending || m.Headers().Get(jetstream.MsgIDHeader) != "a1.ti.0.pending.2" {
		t.Fatalf("after the first answer: %s %s %s", typ, m.Headers().Get(jetstream.MsgIDHeader), m.Data())
	}
	if err := json.Unmarshal(m.Data(), &p); err != nil || p.Approvals[0].InputRequest.Message != "Which label?" {
		t.Fatalf("second step.pending %s", m.Data())
	}
	decide(t, js, "ti", 0, 3, protocol.Decision{CallID: "c1", Approved: true, Input: json.RawMessage(`{"label":"p1"}`)})
	typ, v, _ = next(t, out)
	if typ != protocol.EventCallOutput || !strings.Contains(string(v["item"]), `created \"bug\" with label p1`) {
		t.Fatalf("held call's output: %s %s", typ, mustJSON(v))
	}
	typ, v, _ = next(t, out)
	if typ != protocol.EventStepDone {
		t.Fatalf("then %s", typ)
	}
	var items []protocol.FunctionCallOutput
	if err := json.Unmarshal(v["items"], &items); err != nil || len(items) != 2 || items[0].CallID != "c1" || items[1].CallID != "c2" || items[1].Output != "beside" {
		t.Fatalf("step.done items %s", v["items"])
	}
	log := is.log()
	// The first call, the retry with the repo (requestState echoed, the
	// schema's default filled in), the retry with the label.
	if len(log) != 3 || log[0] != "|null" || log[1] != `state-1:bug|{"repo":{"action":"accept","content":{"private":true,"repo":"again"}}}` ||
		log[2] != `state-2|{"label":{"action":"accept","content":{"label":"p1"}}}` {
		t.Errorf("the server saw %q", log)
	}
}

// TestElicitationHeldLive: a 2025-11-25 server's elicitation inside a
// call holds the step like an approval while the call runs on: a
// step.pending with reason "input" goes out, a decision any worker
// records is read by the worker running the call, which answers the
// elicitation (the SDK fills in the form's defaults); a second
// elicitation of the same call is the step's round 2; a refusal is a
// decline.
func TestElicitationHeldLive(t *testing.T) {
	t.Parallel()
	is := startInputServerWith(t, false)
	servers := map[string]mcp.ServerConfig{"gh": {URL: is.URL, Defer: new(false)}}
	s := natstest.Start(t)
	startInputWorker(t, s, "wa", servers)
	nc := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, nc: nc, js: js}
	ctx := protocol.Context{Kind: protocol.KindText, MCPServers: []string{"gh"}}
	r.catalog(ctx)
	out := inputWatch(t, js, protocol.Subject(protocol.PrefixOutput, "a1", "te"))

	r.send("te", 0, ctx, call("c1", "gh", "survey", `{}`))
	typ, _, m := next(t, out)
	var p protocol.StepPending
	if typ != protocol.EventStepPending || json.Unmarshal(m.Data(), &p) != nil || len(p.Approvals) != 1 || p.Approvals[0].Reason != "input" ||
		p.Approvals[0].InputRequest.Message != "Which repository?" || p.Approvals[0].Namespace != "gh" || p.Approvals[0].Name != "survey" {
		t.Fatalf("first event %s %s", typ, m.Data())
	}
	decide(t, js, "te", 0, 1, protocol.Decision{CallID: "c1", Approved: true, Input: json.RawMessage(`{"repo":"toolruntime"}`)})
	typ, _, m = next(t, out)
	if typ != protocol.EventStepPending || m.Headers().Get(jetstream.MsgIDHeader) != "a1.te.0.pending.2" || json.Unmarshal(m.Data(), &p) != nil || p.Approvals[0].InputRequest.Message != "Which label?" {
		t.Fatalf("after the first answer: %s %s", typ, m.Data())
	}
	decide(t, js, "te", 0, 2, protocol.Decision{CallID: "c1", Approved: true, Input: json.RawMessage(`{"repo":"x","private":false}`)})
	typ, v, _ := next(t, out)
	if typ != protocol.EventCallOutput || !strings.Contains(string(v["item"]), `accept {\"private\":true,\"repo\":\"toolruntime\"}; accept {\"private\":false,\"repo\":\"x\"}`) {
		t.Fatalf("the call's output: %s %s", typ, mustJSON(v))
	}
	if typ, _, _ = next(t, out); typ != protocol.EventStepDone {
		t.Fatalf("then %s", typ)
	}

	// One elicitation answered through the SDK's reinvocation.
	r.send("te", 1, ctx, call("c3", "gh", "create_issue", `{"title":"bug"}`))
	if typ, _, _ = next(t, out); typ != protocol.EventStepPending {
		t.Fatalf("step 1: %s", typ)
	}
	decide(t, js, "te", 1, 1, protocol.Decision{CallID: "c3", Approved: true, Input: json.RawMessage(`{"repo":"toolruntime"}`)})
	typ, v, _ = next(t, out)
	if typ != protocol.EventCallOutput || !strings.Contains(string(v["item"]), `created \"bug\" in toolruntime (private true)`) {
		t.Fatalf("step 1's output: %s %s", typ, mustJSON(v))
	}
	next(t, out)

	// A refusal is a decline.
	r.send("te", 2, ctx, call("c2", "gh", "create_issue", `{"title":"other"}`))
	if typ, _, _ = next(t, out); typ != protocol.EventStepPending {
		t.Fatalf("step 2: %s", typ)
	}
	decide(t, js, "te", 2, 1, protocol.Decision{CallID: "c2", Approved: false, Reason: "no"})
	typ, v, _ = next(t, out)
	if typ != protocol.EventCallOutput || !strings.Contains(string(v["item"]), "not created: the person said decline") {
		t.Fatalf("refused: %s %s", typ, mustJSON(v))
	}
}

// TestInputRequestExpiresAndCancels: a call held for input with no answer
// by the step's expiry is answered rejected, one whose turn is cancelled
// aborted, each then step.done; the server is not called again.
func TestInputRequestExpiresAndCancels(t *testing.T) {
	t.Parallel()
	is := startInputServer(t)
	servers := map[string]mcp.ServerConfig{"gh": {URL: is.URL, Defer: new(false)}}
	s := natstest.Start(t)
	startInputWorkerWith(t, s, "wa", servers, 2*time.Second)
	nc := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, nc: nc, js: js}
	ctx := protocol.Context{Kind: protocol.KindText, MCPServers: []string{"gh"}}
	r.catalog(ctx)
	for _, tt := range []struct{ turn, kind, text string }{
		{"tx", "rejected", "approval timed out: the tool asked a person for input (\\\"Which repository?\\\") and nobody answered"},
		{"tc", "aborted", "user stopped"},
	} {
		out := inputWatch(t, js, protocol.Subject(protocol.PrefixOutput, "a1", tt.turn))
		r.send(tt.turn, 0, ctx, call("c1", "gh", "create_issue", `{"title":"bug"}`))
		if typ, _, _ := next(t, out); typ != protocol.EventStepPending {
			t.Fatalf("%s: %s", tt.turn, typ)
		}
		if tt.turn == "tc" {
			if err := nc.Publish(protocol.Subject(protocol.PrefixCancel, "a1", "tc"), []byte(`{"reason":"user stopped"}`)); err != nil {
				t.Fatal(err)
			}
		}
		typ, v, _ := next(t, out)
		if typ != protocol.EventCallOutput || !strings.Contains(string(v["error"]), `"kind":"`+tt.kind+`"`) || !strings.Contains(string(v["item"]), tt.text) {
			t.Fatalf("%s: %s %s", tt.turn, typ, mustJSON(v))
		}
		if typ, _, _ := next(t, out); typ != protocol.EventStepDone {
			t.Fatalf("%s: then %s", tt.turn, typ)
		}
	}
	if n := len(is.log()); n != 2 {
		t.Errorf("the server was called %d times, want 2", n)
	}
}
