package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/category/todo"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// The model is the outside party, so it is the one thing played here: a
// Responses endpoint that answers each turn from a script (one output
// per model call) and records every request body. The worker (with real
// categories and a real MCP server), NATS, the gateway client and
// openai-go are all real.

// script is a turn's model outputs, one per call of the model, picked by
// the turn's first user message.
type script struct {
	first   string
	outputs [][]string
}

type fakeModel struct {
	t       *testing.T
	mu      sync.Mutex
	scripts []*script
	bodies  map[string][][]byte // first user message → request bodies
	srv     *httptest.Server
}

func newFakeModel(t *testing.T, scripts ...*script) *fakeModel {
	f := &fakeModel{t: t, scripts: scripts, bodies: map[string][][]byte{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/responses" || r.Header.Get("Authorization") != "Bearer test-key" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		Input []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Input) == 0 || len(req.Input[0].Content) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	first := req.Input[0].Content[0].Text
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bodies[first] = append(f.bodies[first], body)
	n := len(f.bodies[first]) - 1
	for _, s := range f.scripts {
		if s.first == first && n < len(s.outputs) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"resp_%d","object":"response","created_at":1764547200,"status":"completed","model":"fake","output":[%s]}`,
				n, strings.Join(s.outputs[n], ","))
			return
		}
	}
	http.Error(w, `{"error":{"message":"the script has no answer"}}`, http.StatusBadRequest)
}

func (f *fakeModel) requests(first string) [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[first]
}

// Output items as a model writes them.
func call(id, name, args string) string {
	b, _ := json.Marshal(map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": id, "name": name, "arguments": args, "status": "completed"})
	return string(b)
}

func nsCall(id, namespace, name, args string) string {
	b, _ := json.Marshal(map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": id, "namespace": namespace, "name": name, "arguments": args, "status": "completed"})
	return string(b)
}

func say(text string) string {
	b, _ := json.Marshal(map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
	return string(b)
}

func search(id, query string) string {
	b, _ := json.Marshal(map[string]any{"type": "tool_search_call", "id": "ts_" + id, "call_id": id, "execution": "client",
		"arguments": map[string]any{"query": query}, "status": "completed"})
	return string(b)
}

// issuesServer is an MCP server over streamable HTTP with one tool whose
// schema's keys are not in sorted order, so that a catalog re-encoded on
// the way to the model would show.
func issuesServer(t *testing.T) string {
	srv := sdk.NewServer(&sdk.Implementation{Name: "issues", Version: "1.0.0"}, &sdk.ServerOptions{Instructions: "The team's issue tracker."})
	srv.AddTool(&sdk.Tool{Name: "list_issues", Description: "List the open issues with a label.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"state":{"type":"string","enum":["open","closed"]},"label":{"type":"string"}},"required":["label"]}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Label string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "#12 crash on start [" + in.Label + "]"}}}, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

// rig is a real worker (todo, workflows, the MCP server "issues",
// diagnostics) on an embedded server, and an agent against model.
type rig struct {
	t      *testing.T
	agent  *Agent
	model  *fakeModel
	gw     *gateway.Client
	gwConn *nats.Conn
}

func newRig(t *testing.T, model *fakeModel) *rig {
	t.Helper()
	srv := natstest.Start(t)
	m, err := mcp.NewManager(mcp.Config{Servers: map[string]mcp.ServerConfig{"issues": {URL: issuesServer(t)}}},
		mcp.Options{Logger: workertest.Logger(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	workertest.RunWorker(t, srv, "w1", func(js jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		td, err := todo.New(context.Background(), js, todo.Config{})
		if err != nil {
			t.Fatal(err)
		}
		wf := workflowtask.New(js, workflowtask.Config{Logger: workertest.Logger()})
		return []tool.Category{td.Category(), wf.Category(), mcp.Category(m, nil), diagnostics.Category(diagnostics.Config{})}, wf
	})
	nc := srv.Connect(t)
	gw, err := gateway.New(nc, gateway.Options{Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{GW: gw, ModelName: "fake", Instructions: "Be brief.", MaxSteps: 10, Log: workertest.Logger(),
		Model: openai.NewClient(option.WithBaseURL(model.srv.URL+"/v1/"), option.WithAPIKey("test-key"), option.WithMaxRetries(0))}
	return &rig{t: t, agent: a, model: model, gw: gw, gwConn: nc}
}

var mainCtx = protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{diagnostics.Binding: true}, MCPServers: []string{"issues"}}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// requestField is one top-level field of a request body, as its bytes.
func requestField(t *testing.T, body []byte, field string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m[field]
}

func inputItems(t *testing.T, body []byte) []json.RawMessage {
	t.Helper()
	var items []json.RawMessage
	if err := json.Unmarshal(requestField(t, body, "input"), &items); err != nil {
		t.Fatal(err)
	}
	return items
}

// checkCatalogSent fails unless every request of the turn carried the
// catalog's tools exactly as the worker sent them.
func (r *rig) checkCatalogSent(first string, tc protocol.Context, turnID string) {
	r.t.Helper()
	cat, err := r.gw.Catalog(ctxT(r.t), "a1", turnID, tc)
	if err != nil {
		r.t.Fatal(err)
	}
	for i, body := range r.model.requests(first) {
		if got := requestField(r.t, body, "tools"); !bytes.Equal(got, cat.Tools) {
			r.t.Fatalf("request %d carried tools\n%s\nnot the catalog's bytes\n%s", i, got, cat.Tools)
		}
	}
}

// A turn: two calls in parallel (ping and todo_write), then an answer.
// The model's items and the step's items reach the next request as the
// bytes they were.
func TestParallelCallsTurn(t *testing.T) {
	t.Parallel()
	const first = "Ping twice and note it."
	out0 := []string{say("On it."), call("c1", "ping", `{"note":"a"}`), call("c2", "todo_write", `{"items":[{"content":"ping","status":"completed"}]}`)}
	model := newFakeModel(t, &script{first: first, outputs: [][]string{out0, {say("Both done.")}}})
	r := newRig(t, model)
	var mu sync.Mutex
	var dones []*protocol.StepDone
	r.agent.OnEvent = func(_ string, ev protocol.Event) {
		if d, ok := ev.(*protocol.StepDone); ok {
			mu.Lock()
			dones = append(dones, d)
			mu.Unlock()
		}
	}
	res, err := r.agent.RunTurn(ctxT(t), Turn{AgentID: "a1", TurnID: "t1", Context: mainCtx, Message: first})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Both done." || res.Steps != 2 || res.Cancelled {
		t.Fatalf("result %+v", res)
	}
	reqs := model.requests(first)
	if len(reqs) != 2 || len(dones) != 2 || !dones[1].EndTurn || len(dones[0].Items) != 2 {
		t.Fatalf("%d requests, step.done %+v", len(reqs), dones)
	}
	in := inputItems(t, reqs[1])
	// user message, the three model items, the two outputs, in order.
	if len(in) != 6 {
		t.Fatalf("second request's input has %d items: %s", len(in), requestField(t, reqs[1], "input"))
	}
	for i, want := range append(out0, string(dones[0].Items[0]), string(dones[0].Items[1])) {
		if string(in[i+1]) != want {
			t.Errorf("input[%d] is\n%s\nwant\n%s", i+1, in[i+1], want)
		}
	}
	if !strings.Contains(string(dones[0].Items[0]), "pong a") || !strings.Contains(string(dones[0].Items[1]), "ping") {
		t.Fatalf("items %s", dones[0].Items)
	}
	r.checkCatalogSent(first, mainCtx, "t1")
	for field, want := range map[string]string{"model": `"fake"`, "store": "false", "include": `["reasoning.encrypted_content"]`, "instructions": `"Be brief."`} {
		if got := string(requestField(t, reqs[0], field)); got != want {
			t.Errorf("request %s is %s, want %s", field, got, want)
		}
	}
}

// A deferred MCP tool: called before it is loaded it is not_loaded; tool
// search loads it (its tool_search_output goes to the model as it came),
// and then it runs.
func TestDeferredToolLoadedByToolSearch(t *testing.T) {
	t.Parallel()
	const first = "What is broken?"
	model := newFakeModel(t, &script{first: first, outputs: [][]string{
		{nsCall("c1", "issues", "list_issues", `{"label":"bug"}`)},
		{search("c2", "open issues with a label")},
		{nsCall("c3", "issues", "list_issues", `{"label":"bug"}`)},
		{say("Issue 12 crashes on start.")},
	}})
	r := newRig(t, model)
	outs := map[string]*protocol.CallOutput{}
	var mu sync.Mutex
	r.agent.OnEvent = func(_ string, ev protocol.Event) {
		if o, ok := ev.(*protocol.CallOutput); ok {
			mu.Lock()
			outs[o.CallID] = o
			mu.Unlock()
		}
	}
	cat, err := r.gw.Catalog(ctxT(t), "a1", "t2", mainCtx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cat.Tools), `"defer_loading":true`) || !strings.Contains(string(cat.Tools), `"type":"tool_search"`) {
		t.Fatalf("the MCP tool is not deferred behind tool search: %s", cat.Tools)
	}
	res, err := r.agent.RunTurn(ctxT(t), Turn{AgentID: "a1", TurnID: "t2", Context: mainCtx, Message: first})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Issue 12 crashes on start." || res.Steps != 4 {
		t.Fatalf("result %+v", res)
	}
	if e := outs["c1"].Error; e == nil || e.Kind != protocol.NotLoaded {
		t.Fatalf("c1 before the search: %+v", outs["c1"])
	}
	search := outs["c2"].Item
	if !strings.Contains(string(search), `"type":"tool_search_output"`) || !strings.Contains(string(search), `"list_issues"`) {
		t.Fatalf("the search's output %s", search)
	}
	if outs["c3"].Status != protocol.StatusOK || !strings.Contains(string(outs["c3"].Item), "#12 crash on start [bug]") {
		t.Fatalf("c3 after the search: %s", outs["c3"].Item)
	}
	// The tool_search_output reached the model byte for byte.
	reqs := model.requests(first)
	in := inputItems(t, reqs[2])
	if got := in[len(in)-1]; !bytes.Equal(got, search) {
		t.Fatalf("the model got\n%s\nfor the search, not the worker's\n%s", got, search)
	}
	r.checkCatalogSent(first, mainCtx, "t2")
}

// Invalid arguments get an output that says what to fix; the model fixes
// them on the next step.
func TestInvalidArgumentFixedOnTheNextStep(t *testing.T) {
	t.Parallel()
	const first = "Wait a moment."
	model := newFakeModel(t, &script{first: first, outputs: [][]string{
		{call("c1", "sleep", `{"ms":"soon"}`)},
		{call("c2", "sleep", `{"ms":5}`)},
		{say("Waited.")},
	}})
	r := newRig(t, model)
	res, err := r.agent.RunTurn(ctxT(t), Turn{AgentID: "a1", TurnID: "t3", Context: mainCtx, Message: first})
	if err != nil || res.Text != "Waited." || res.Steps != 3 {
		t.Fatalf("result %+v, %v", res, err)
	}
	reqs := model.requests(first)
	in := inputItems(t, reqs[1])
	fixme := string(in[len(in)-1])
	if !strings.Contains(fixme, `"call_id":"c1"`) || !strings.Contains(fixme, "invalid_arguments") || !strings.Contains(fixme, "/ms") {
		t.Fatalf("the model was told %s", fixme)
	}
	in = inputItems(t, reqs[2])
	if ok := string(in[len(in)-1]); !strings.Contains(ok, `"call_id":"c2"`) || !strings.Contains(ok, "waited 5 ms") {
		t.Fatalf("after the fix the model got %s", ok)
	}
}

// Stopping the gateway's turn mid-call cancels it on the workers: the
// call is aborted, the step still ends, and the model is not called again.
func TestCancelMidCall(t *testing.T) {
	t.Parallel()
	const first = "Wait a minute."
	model := newFakeModel(t, &script{first: first, outputs: [][]string{
		{call("c1", "sleep", `{"ms":60000}`)},
		{say("never")},
	}})
	r := newRig(t, model)
	ctx, cancel := context.WithCancel(ctxT(t))
	var mu sync.Mutex
	var aborted *protocol.CallOutput
	r.agent.OnEvent = func(_ string, ev protocol.Event) {
		switch ev := ev.(type) {
		case *protocol.Activity:
			if ev.State == protocol.ActivityStarted {
				cancel()
			}
		case *protocol.CallOutput:
			mu.Lock()
			aborted = ev
			mu.Unlock()
		}
	}
	res, err := r.agent.RunTurn(ctx, Turn{AgentID: "a1", TurnID: "t4", Context: mainCtx, Message: first})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cancelled || res.Steps != 1 {
		t.Fatalf("result %+v", res)
	}
	if aborted == nil || aborted.Error == nil || aborted.Error.Kind != protocol.Aborted {
		t.Fatalf("the call's output %+v", aborted)
	}
	if n := len(model.requests(first)); n != 1 {
		t.Fatalf("the model was called %d times after the cancel", n-1)
	}
}

// A workflow: the main turn starts it, the task.ready event starts a task
// turn, the model answers in prose and gets the one repair instruction,
// then submits a result that is accepted.
func TestWorkflowTaskTurnSubmitsAResult(t *testing.T) {
	t.Parallel()
	const first, instructions = "Research this.", "Answer the question: what is 6 times 7?"
	wfArgs, _ := json.Marshal(map[string]any{"title": "research", "tasks": []any{map[string]any{"id": "q1", "instructions": instructions,
		"result_schema": map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "integer"}},
			"required": []string{"answer"}, "additionalProperties": false}}}})
	model := newFakeModel(t,
		&script{first: first, outputs: [][]string{{call("c1", "start_workflow", string(wfArgs))}, {say("The task is running.")}}},
		&script{first: instructions, outputs: [][]string{{say("It is 42.")}, {call("r1", "submit_result", `{"result":{"answer":42}}`)}}},
	)
	r := newRig(t, model)
	ctx := ctxT(t)
	serve, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = r.agent.ServeTasks(serve, "agent") }()
	accepted := make(chan *protocol.WorkflowEvent, 1)
	go func() {
		_ = r.gw.WorkflowEvents(serve, "test", func(_ context.Context, ev *protocol.WorkflowEvent) error {
			if ev.Type == protocol.EventTaskAccepted {
				accepted <- ev
			}
			return nil
		})
	}()
	res, err := r.agent.RunTurn(ctx, Turn{AgentID: "a1", TurnID: "t5", Context: mainCtx, Message: first})
	if err != nil || res.Text != "The task is running." {
		t.Fatalf("main turn %+v, %v", res, err)
	}
	var ev *protocol.WorkflowEvent
	select {
	case ev = <-accepted:
	case <-ctx.Done():
		t.Fatal("the task was never accepted")
	}
	if ev.TaskID != "q1" || string(ev.Result) != `{"answer":42}` {
		t.Fatalf("task.accepted %+v", ev)
	}
	r.agent.WaitTasks()
	reqs := model.requests(instructions)
	if len(reqs) != 2 {
		t.Fatalf("the task turn called the model %d times", len(reqs))
	}
	in := inputItems(t, reqs[1])
	var repair struct {
		Role    string `json:"role"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(in[len(in)-1], &repair); err != nil || repair.Role != "user" || !strings.Contains(repair.Content[0].Text, "submit_result") {
		t.Fatalf("the task turn's second request ends with %s, not the repair instruction", in[len(in)-1])
	}
	// The task turn's tools were its catalog's bytes too.
	r.checkCatalogSent(instructions, protocol.Context{Kind: protocol.KindWorkflowTask, Bindings: map[string]bool{}, WorkflowID: ev.WorkflowID, TaskID: "q1"}, ev.TurnID)
}

// The command as a user runs it: the endpoint and key from the SDK's
// environment variables, the rest from flags; the answer on stdout.
func TestCommandLine(t *testing.T) {
	const first = "Ping once."
	model := newFakeModel(t, &script{first: first, outputs: [][]string{{call("c1", "ping", `{}`)}, {say("pong it was")}}})
	srv := natstest.Start(t)
	workertest.RunWorker(t, srv, "w1", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{diagnostics.Category(diagnostics.Config{})}, nil
	})
	t.Setenv("OPENAI_BASE_URL", model.srv.URL+"/v1/")
	t.Setenv("OPENAI_API_KEY", "test-key")
	var stdout, stderr bytes.Buffer
	err := run(ctxT(t), []string{"--nats-url", srv.ClientURL(), "--model", "fake", "--bind", "diagnostics", "--agent", "a1", "--turn", "t1", "-v", first}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if stdout.String() != "pong it was\n" {
		t.Fatalf("stdout %q", stdout.String())
	}
	if !strings.Contains(stderr.String(), "c1 ping → ok") || !strings.Contains(stderr.String(), "step 1 done, end_turn true") {
		t.Fatalf("stderr %q", stderr.String())
	}
	if err := run(ctxT(t), nil, io.Discard, io.Discard); err == nil {
		t.Fatal("no message and nothing to serve ran")
	}
}

func TestApproverAsksOnTheTerminal(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	ask := approver("ask", strings.NewReader("y\nn\n"), &out)
	call := protocol.PendingCall{CallID: "c1", Namespace: "gh", Name: "close_issue", Arguments: json.RawMessage(`{"n":1}`), Reason: "destructive"}
	for i, want := range []bool{true, false, false} { // the third meets the end of input
		if d := ask(context.Background(), call); d.Approved != want || (!want && d.Reason == "") {
			t.Errorf("answer %d: %+v, want approved %v with a reason when refused", i, d, want)
		}
	}
	if !strings.HasPrefix(out.String(), `approve gh.close_issue {"n":1} (destructive)? [y/N] `) {
		t.Fatalf("asked %q", out.String())
	}
	if !approver("all", nil, nil)(context.Background(), call).Approved || approver("none", nil, nil)(context.Background(), call).Approved {
		t.Fatal("all and none")
	}
}
