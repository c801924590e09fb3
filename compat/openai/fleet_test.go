package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// workerBin is cmd/worker, built once for the whole run by TestMain.
var workerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "compat-openai-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workerBin = filepath.Join(dir, "worker")
	// Built in the runtime's own module, with its go.sum: the binary a
	// gateway meets, not one with this module's dependency versions.
	build := exec.Command("go", "build", "-o", workerBin, "./cmd/worker")
	build.Dir = filepath.Join("..", "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cmd/worker:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// mcpServer is the MCP namespace of the catalog: a Go SDK server over
// streamable HTTP, with a tool for each outcome a gateway must handle.
const mcpServer = "gotest"

type textIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type waitIn struct {
	MS int `json:"ms" jsonschema:"how long to work, in milliseconds"`
}

type searchIn struct {
	Query string   `json:"query" jsonschema:"what to look for"`
	Tags  []string `json:"tags,omitempty" jsonschema:"only notes with all these tags"`
	Limit int      `json:"limit,omitempty" jsonschema:"at most this many notes"`
}

type empty struct{}

func startMCP(t *testing.T) *httptest.Server {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "gotest", Version: "1.0.0"}, &sdk.ServerOptions{
		Instructions: "Notes for tests: echo, search, wait, fail, draw and scan.",
	})
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true}
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echo the text back.", Annotations: readOnly},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "search_notes", Description: "Search the notes <by words & tags>.", Annotations: readOnly},
		func(_ context.Context, _ *sdk.CallToolRequest, in searchIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "no notes match " + in.Query}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "wait", Description: "Work for a while, then answer; stops when cancelled.", Annotations: readOnly},
		func(ctx context.Context, _ *sdk.CallToolRequest, in waitIn) (*sdk.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "fail", Description: "Always fails.", Annotations: readOnly},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "it failed on purpose"}}}, nil, nil
		})
	// draw and scan return media: images, PDF blob resources and audio,
	// each a part of the call's output array (media_test.go).
	sdk.AddTool(srv, &sdk.Tool{Name: "draw", Description: "Draw a picture and caption it.", Annotations: readOnly},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "a picture:"},
				&sdk.ImageContent{MIMEType: "image/png", Data: drawPNG},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: sketchURI, MIMEType: "application/pdf", Blob: sketchPDF}},
				&sdk.AudioContent{MIMEType: "audio/wav", Data: chirpWAV},
			}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "scan", Description: "Scan the document: a preview and the PDF.", Annotations: readOnly},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.ImageContent{MIMEType: "image/png", Data: drawPNG},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: scanURI, MIMEType: "application/pdf", Blob: bigPDF}},
			}}, nil, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs
}

// fleet is one worker process on its own embedded server, seen through
// a gateway's connection.
type fleet struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	args  []string
	homes string  // --computer-root: the agents' homes
	procs []*proc // every worker started, the running one last
}

// The skill of the catalog; it needs the MCP server, as a skill may.
const skill = "notes"

// allContext binds every category, the skill and the MCP server.
func allContext() map[string]any {
	return map[string]any{
		"kind": "text",
		"bindings": map[string]bool{
			"computer": true, "web": true, "brain": true, "schedules": true,
			"background_jobs": true, "diagnostics": true, "todo": true,
		},
		"skills":      []string{skill},
		"mcp_servers": []string{mcpServer},
	}
}

// startFleet runs cmd/worker with every category on by its flags: the
// computer tools, web fetch and search (a SearXNG stand-in that is never
// asked here), diagnostics, a skill, and the MCP server with deferred
// tools (so the catalog ends with tool_search) and a short time limit on
// wait (so a call can time out quickly). extra are more worker flags.
func startFleet(t *testing.T, extra ...string) *fleet {
	t.Helper()
	s := natstest.Start(t)
	dir := t.TempDir()
	mcpSrv := startMCP(t)
	searx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"results":[]}`))
	}))
	t.Cleanup(searx.Close)

	cfg, _ := json.Marshal(map[string]any{"servers": map[string]any{mcpServer: map[string]any{
		"url":         mcpSrv.URL,
		"description": "Notes of the test server.",
		"tools": map[string]any{
			"echo": map[string]any{"defer": false},
			"wait": map[string]any{"timeout": "300ms"},
		},
	}}})
	mcpConfig := filepath.Join(dir, "mcp.json")
	must(t, os.WriteFile(mcpConfig, cfg, 0o644))
	skills := filepath.Join(dir, "skills")
	must(t, os.MkdirAll(filepath.Join(skills, skill), 0o755))
	must(t, os.WriteFile(filepath.Join(skills, skill, "SKILL.md"), []byte("---\nname: "+skill+
		"\ndescription: Keep notes with the gotest server's tools.\nmcp_servers: "+mcpServer+
		"\n---\nSearch the notes before writing one.\n"), 0o644))
	homes := filepath.Join(dir, "homes")
	must(t, os.MkdirAll(homes, 0o755))

	f := &fleet{homes: homes, args: append([]string{
		"--nats-url", s.ClientURL(), "--name", "compat",
		"--computer-root", homes,
		// The catalog must hold run_command whatever the host: the bwrap
		// start check fails where user namespaces are off. No command runs.
		"--command-sandbox", "none",
		"--web-fetch", "--web-search-url", searx.URL,
		"--diagnostics", "--skills-dir", skills, "--mcp-config", mcpConfig,
		"--grace", "5s",
	}, extra...)}
	f.nc = s.Connect(t)
	js, err := jetstream.New(f.nc)
	must(t, err)
	f.js = js
	t.Cleanup(func() { f.stop(t) })
	f.start(t)
	return f
}

// start runs a worker process and waits until it answers turn.tools.
func (f *fleet) start(t *testing.T) {
	t.Helper()
	p := &proc{cmd: exec.Command(workerBin, f.args...), exited: make(chan error, 1)}
	p.cmd.Env = cleanEnv()
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	must(t, p.cmd.Start())
	go func() { p.exited <- p.cmd.Wait() }()
	f.procs = append(f.procs, p)
	probe, _ := json.Marshal(map[string]any{"agent_id": "probe", "turn_id": "probe", "context": map[string]any{"kind": "text"}})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := f.nc.Request(protocol.SubjectTools, probe, time.Second); err == nil {
			return
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("worker exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("worker never answered turn.tools")
		}
	}
}

// kill ends the running worker with SIGKILL, as a crash would.
func (f *fleet) kill(t *testing.T) {
	t.Helper()
	p := f.procs[len(f.procs)-1]
	must(t, p.cmd.Process.Kill())
	p.exited <- <-p.exited
}

// stop ends the running worker with SIGTERM and logs every worker's
// output when the test failed.
func (f *fleet) stop(t *testing.T) {
	for i, p := range f.procs {
		select {
		case err := <-p.exited:
			p.exited <- err
		default:
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-p.exited:
				p.exited <- err
			case <-time.After(30 * time.Second):
				_ = p.cmd.Process.Kill()
				p.exited <- <-p.exited
				t.Error("worker did not stop within 30s of SIGTERM")
			}
		}
		if t.Failed() {
			t.Logf("worker %d log:\n%s", i, p.logs.String())
		}
	}
}

// proc is one worker process.
type proc struct {
	cmd    *exec.Cmd
	exited chan error // holds Wait's error once it has exited
	logs   syncBuffer
}

// cleanEnv is this process's environment without the settings the worker
// reads (WORKER_*, NATS_*, OTEL_*), so that the host never changes what
// the worker under test does.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "WORKER_") || strings.HasPrefix(kv, "NATS_") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// catalogReply is a turn.tools reply, with the tools' bytes as sent.
type catalogReply struct {
	Tools  json.RawMessage `json:"tools"`
	Digest string          `json:"digest"`
	Notes  []string        `json:"notes"`
}

func (f *fleet) catalog(t *testing.T, agent, turn string, ctx map[string]any) catalogReply {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"agent_id": agent, "turn_id": turn, "context": ctx})
	msg, err := f.nc.Request(protocol.SubjectTools, req, 30*time.Second)
	must(t, err)
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("turn.tools: error %s: %s", code, msg.Header.Get("Nats-Service-Error"))
	}
	var r catalogReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		t.Fatalf("turn.tools reply %s: %v", msg.Data, err)
	}
	if len(r.Notes) > 0 {
		t.Fatalf("catalog notes (a source could not contribute): %v", r.Notes)
	}
	return r
}

// event is a call.output or step.done, with its bytes as published.
type event struct {
	Type   string `json:"type"`
	Step   int    `json:"step"`
	CallID string `json:"call_id"`
	Status string `json:"status"`
	Error  *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
	Item    json.RawMessage   `json:"item"`
	Items   []json.RawMessage `json:"items"`
	EndTurn bool              `json:"end_turn"`
	Raw     json.RawMessage   `json:"-"`
}

// stepRun is a published step whose events are being read.
type stepRun struct {
	f     *fleet
	n     int
	agent string
	turn  string
	cons  jetstream.Consumer
}

// publish publishes step n of a main turn with the given output items,
// after creating the consumer that reads its events (so none is missed).
func (f *fleet) publish(t *testing.T, agent, turn string, n int, ctx map[string]any, output ...any) *stepRun {
	t.Helper()
	bg := context.Background()
	cons, err := f.js.OrderedConsumer(bg, protocol.StreamOutputs, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, agent, turn)},
	})
	must(t, err)
	body, _ := json.Marshal(map[string]any{"agent_id": agent, "turn_id": turn, "step": n, "context": ctx, "output": output})
	m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, agent, turn))
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID(agent, turn, int64(n)))
	pctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	_, err = f.js.PublishMsg(pctx, m)
	must(t, err)
	return &stepRun{f: f, n: n, agent: agent, turn: turn, cons: cons}
}

// wait reads the step's events up to its step.done and returns the
// call.output events by call id and the step.done.
func (r *stepRun) wait(t *testing.T) (map[string]event, event) {
	t.Helper()
	outs := map[string]event{}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		m, err := r.cons.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			continue
		}
		var e event
		if err := json.Unmarshal(m.Data(), &e); err != nil {
			t.Fatalf("event %s: %v", m.Data(), err)
		}
		if e.Step != r.n {
			continue
		}
		e.Raw = m.Data()
		switch e.Type {
		case "call.output":
			outs[e.CallID] = e
		case "step.done":
			return outs, e
		}
	}
	t.Fatalf("no step.done for %s.%s step %d within 60s", r.agent, r.turn, r.n)
	return nil, event{}
}

// call is a function_call item as the model returns it.
func call(id, name, args string) map[string]any {
	return map[string]any{"type": "function_call", "call_id": id, "name": name, "arguments": args}
}

// nsCall is a function_call of a tool in a namespace.
func nsCall(id, namespace, name, args string) map[string]any {
	c := call(id, name, args)
	c["namespace"] = namespace
	return c
}

// searchCall is a client-executed tool_search_call.
func searchCall(id, query string) map[string]any {
	return map[string]any{"type": "tool_search_call", "call_id": id, "execution": "client", "arguments": map[string]any{"query": query}}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// syncBuffer collects the worker's log from two pipes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
