package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/category/skills"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/media"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// A real worker on an embedded NATS server, with the skills and MCP
// categories as cmd/worker wires them: skills first, then MCP servers,
// the MCP category told which servers the turn's skills need.

type rig struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream
	m  *mcp.Manager
}

func startRig(t *testing.T, servers map[string]mcp.ServerConfig) *rig {
	t.Helper()
	s := natstest.Start(t)
	lib, err := skills.Load("../skills/testdata/skills")
	if err != nil {
		t.Fatal(err)
	}
	m := newManager(t, servers)
	nc := s.Connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := engine.Config{Name: "test", Grace: 5 * time.Second, CallTimeout: 30 * time.Second,
		Topology: bus.Topology{AckWait: 2 * time.Second, MaxDeliver: 3}}
	w, err := engine.New(ctx, nc, cfg, turn.NewAssembler(skills.Category(lib), mcp.Category(m, lib)), nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop")
		}
	})
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, nc: nc, js: js, m: m}
}

func (r *rig) catalog(c protocol.Context) protocol.CatalogReply {
	r.t.Helper()
	req, _ := json.Marshal(protocol.CatalogRequest{AgentID: "a1", TurnID: "t1", Context: c})
	var msg *nats.Msg
	var err error
	for range 50 { // until the service is up
		if msg, err = r.nc.Request(protocol.SubjectTools, req, time.Minute); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	var reply protocol.CatalogReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		r.t.Fatalf("reply %s: %v", msg.Data, err)
	}
	return reply
}

// watch reads a turn's events as they arrive.
func (r *rig) watch(turnID string) <-chan event {
	r.t.Helper()
	c, err := r.js.OrderedConsumer(context.Background(), protocol.StreamOutputs,
		jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, "a1", turnID)}})
	if err != nil {
		r.t.Fatal(err)
	}
	ch := make(chan event, 100)
	cc, err := c.Consume(func(m jetstream.Msg) {
		var ev event
		_ = json.Unmarshal(m.Data(), &ev)
		ch <- ev
	})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(cc.Stop)
	return ch
}

type event struct {
	Type    string            `json:"type"`
	CallID  string            `json:"call_id"`
	Status  string            `json:"status"`
	Error   *struct{ Kind }   `json:"error"`
	Item    json.RawMessage   `json:"item"`
	Items   []json.RawMessage `json:"items"`
	EndTurn bool              `json:"end_turn"`
}

// Kind holds an error kind.
type Kind struct {
	Kind string `json:"kind"`
}

// stepResult gathers a step's events up to step.done.
func stepResult(t *testing.T, ch <-chan event) (map[string]event, event) {
	t.Helper()
	outs := map[string]event{}
	for {
		select {
		case ev := <-ch:
			if ev.Type == protocol.EventStepDone {
				return outs, ev
			}
			outs[ev.CallID] = ev
		case <-time.After(60 * time.Second):
			t.Fatal("no step.done")
		}
	}
}

func (r *rig) send(turnID string, n int, c protocol.Context, items ...map[string]any) {
	r.t.Helper()
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = it
	}
	body, _ := json.Marshal(map[string]any{"agent_id": "a1", "turn_id": turnID, "step": n, "context": c, "output": out})
	m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, "a1", turnID))
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID("a1", turnID, int64(n)))
	if _, err := r.js.PublishMsg(context.Background(), m); err != nil {
		r.t.Fatal(err)
	}
}

func call(id, ns, name, args string) map[string]any {
	return map[string]any{"type": "function_call", "call_id": id, "namespace": ns, "name": name, "arguments": args}
}

func search(id, query string) map[string]any {
	return map[string]any{"type": "tool_search_call", "call_id": id, "execution": "client", "arguments": map[string]any{"query": query}}
}

func text(t *testing.T, ev event) string {
	t.Helper()
	var it protocol.FunctionCallOutput
	if err := json.Unmarshal(ev.Item, &it); err != nil {
		t.Fatalf("item %s: %v", ev.Item, err)
	}
	return it.Output
}

func errKind(ev event) string {
	if ev.Error == nil {
		return ""
	}
	return ev.Error.Kind.Kind
}

// TestWorker runs turns through a worker: the catalog with namespaces,
// deferred tools, skills and notes; tool search loading a tool that the
// next step calls; read_skill; a server enabled by a skill; a slow call
// aborted by turn.cancel with the cancel reaching the server; and a
// server killed under a call, then used again.
func TestWorker(t *testing.T) {
	t.Parallel()
	goCfg, marks := stdioConfig(t)
	hs := startHTTPServer(t)
	r := startRig(t, map[string]mcp.ServerConfig{"go": goCfg, "calc": hs.config()})
	ctx := protocol.Context{Kind: protocol.KindText, MCPServers: []string{"go", "nowhere"}, Skills: []string{"arith", "nope"}}

	reply := r.catalog(ctx)
	var entries []struct {
		Type  string `json:"type"`
		Name  string `json:"name"`
		Tools []struct {
			Name  string `json:"name"`
			Defer bool   `json:"defer_loading"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reply.Tools, &entries); err != nil {
		t.Fatal(err)
	}
	var shape []string
	for _, e := range entries {
		shape = append(shape, e.Type+":"+e.Name)
		for _, tl := range e.Tools {
			if !tl.Defer {
				t.Errorf("%s.%s is not deferred", e.Name, tl.Name)
			}
		}
	}
	// read_skill, then the servers in name order (calc enabled by the
	// arith skill), then tool search.
	if got := strings.Join(shape, " "); got != "function:read_skill namespace:calc namespace:go tool_search:" {
		t.Errorf("catalog entries %s", got)
	}
	for _, want := range []string{`skill "nope" is not available`, `mcp server "nowhere", named by the turn's context, is not configured`} {
		if !strings.Contains(strings.Join(reply.Notes, "\n"), want) {
			t.Errorf("notes %q lack %q", reply.Notes, want)
		}
	}

	// Step 0: calling a deferred tool before searching; a search; a skill.
	ev := r.watch("t1")
	r.send("t1", 0, ctx,
		call("c1", "go", "echo", `{"text":"too early"}`),
		search("s1", "echo text back"),
		call("c2", "", "read_skill", `{"name":"arith"}`),
	)
	outs, done := stepResult(t, ev)
	if errKind(outs["c1"]) != "not_loaded" || !strings.Contains(text(t, outs["c1"]), "tool_search") {
		t.Errorf("c1: %s %q", errKind(outs["c1"]), text(t, outs["c1"]))
	}
	if !strings.Contains(text(t, outs["c2"]), "Use calc.add") {
		t.Errorf("read_skill: %q", text(t, outs["c2"]))
	}
	var so protocol.ToolSearchOutput
	if err := json.Unmarshal(done.Items[1], &so); err != nil {
		t.Fatal(err)
	}
	found := string(json.RawMessage(mustJSON(so.Tools)))
	if !strings.Contains(found, `"name":"go"`) || !strings.Contains(found, `"name":"echo"`) || !strings.Contains(found, `"parameters"`) {
		t.Errorf("tool_search_output tools %s", found)
	}

	// Step 1: the loaded tool runs; one not loaded still does not.
	r.send("t1", 1, ctx, call("c3", "go", "echo", `{"text":"hello"}`), call("c4", "calc", "write_note", `{"text":"x"}`))
	outs, _ = stepResult(t, ev)
	if outs["c3"].Status != "ok" || text(t, outs["c3"]) != "hello" {
		t.Errorf("c3: %s %q", outs["c3"].Status, text(t, outs["c3"]))
	}
	if errKind(outs["c4"]) != "not_loaded" {
		t.Errorf("c4: %s", errKind(outs["c4"]))
	}

	// Step 2: search "add numbers" loads calc.add (the skill's server);
	// a slow call is aborted by turn.cancel and the server hears of it.
	r.send("t1", 2, ctx, search("s2", "add two whole numbers"), search("s3", "work for a while"))
	stepResult(t, ev)
	// c5 has a step of its own: beside the slow call, the cancel could
	// reach it before it ends on a busy machine.
	r.send("t1", 3, ctx, call("c5", "calc", "add", `{"a":1,"b":2}`))
	outs, _ = stepResult(t, ev)
	if outs["c5"].Status != "ok" || text(t, outs["c5"]) != `{"sum":3}` {
		t.Errorf("c5: %s %q", outs["c5"].Status, text(t, outs["c5"]))
	}
	r.send("t1", 4, ctx, call("c6", "go", "slow", `{"ms":60000,"tag":"t1"}`))
	waitMark(t, marks, "start t1")
	if err := r.nc.Publish(protocol.Subject(protocol.PrefixCancel, "a1", "t1"), []byte(`{"reason":"user stopped"}`)); err != nil {
		t.Fatal(err)
	}
	outs, done = stepResult(t, ev)
	if errKind(outs["c6"]) != "aborted" || !done.EndTurn {
		t.Errorf("c6: %s, end_turn %v", errKind(outs["c6"]), done.EndTurn)
	}
	waitMark(t, marks, "cancelled t1")

	// Another turn: the stdio server is killed under a call that is not
	// read-only; the next step's call gets a new server.
	ev2 := r.watch("t2")
	r.send("t2", 0, ctx, search("s1", "write for a while"), search("s2", "process id"))
	stepResult(t, ev2)
	r.send("t2", 1, ctx, call("c1", "go", "slow_write", `{"ms":60000,"tag":"t2"}`))
	waitMark(t, marks, "start t2")
	pid := r.m.ChildPID("go")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	outs, _ = stepResult(t, ev2)
	if errKind(outs["c1"]) != "tool_error" || !strings.Contains(text(t, outs["c1"]), "may or may not have taken effect") {
		t.Errorf("killed call: %s %q", errKind(outs["c1"]), text(t, outs["c1"]))
	}
	r.send("t2", 2, ctx, call("c2", "go", "pid", ``))
	outs, _ = stepResult(t, ev2)
	if outs["c2"].Status != "ok" || text(t, outs["c2"]) == "" {
		t.Errorf("after the kill: %s %q", outs["c2"].Status, text(t, outs["c2"]))
	}
	waitReaped(t, pid)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestMediaOverNATS: an MCP server's image reaches the model as an
// input_image, its PDF blob resource as an input_file, and its audio as a
// note saying what was left out, in call.output and in step.done alike.
func TestMediaOverNATS(t *testing.T) {
	t.Parallel()
	goCfg, _ := stdioConfig(t)
	r := startRig(t, map[string]mcp.ServerConfig{"go": goCfg})
	ctx := protocol.Context{Kind: protocol.KindText, MCPServers: []string{"go"}}
	ev := r.watch("tm")
	r.send("tm", 0, ctx, search("s1", "draw a picture and caption it"))
	stepResult(t, ev)
	r.send("tm", 1, ctx, call("c1", "go", "draw", ``))
	outs, done := stepResult(t, ev)
	if outs["c1"].Status != "ok" || len(done.Items) != 1 {
		t.Fatalf("draw: %s %s, %d items", outs["c1"].Status, outs["c1"].Item, len(done.Items))
	}
	for where, raw := range map[string]json.RawMessage{"call.output": outs["c1"].Item, "step.done": done.Items[0]} {
		var fo protocol.FunctionCallOutput
		if err := json.Unmarshal(raw, &fo); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		want := []protocol.InputContent{
			{Type: "input_text", Text: "a picture:\n[resource note://1, text/plain]\nthe caption"},
			{Type: "input_image", ImageURL: media.DataURL(media.PNG, drawing()), Detail: "auto"},
			{Type: "input_file", Filename: "picture.pdf", FileData: media.DataURL(media.PDF, drawingPDF)},
		}
		if len(fo.Content) != 4 || !slices.Equal(fo.Content[:3], want) {
			t.Errorf("%s: output %.400s", where, raw)
			continue
		}
		if n := fo.Content[3]; n.Type != "input_text" || !strings.HasPrefix(n.Text, "[left out: audio/wav content (16 bytes) from the MCP tool go.draw, because") {
			t.Errorf("%s: note %+v", where, n)
		}
	}
}
