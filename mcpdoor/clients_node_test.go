package mcpdoor_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/mcpdoor/conformance"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/mcpdoor"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// clientFleet is a real worker with the door tests' tools and the
// conformance fixtures, which approves every held confirm_delete of the
// clients' agent. Each client gets its own doors (see doors), so that
// the clients can run at once.
type clientFleet struct {
	token string
	s     *natstest.Server
	ps    *mcpdoor.Principals
	key   []byte

	approvals atomic.Int64 // held calls the fleet's side approved
}

// clientDoors are two door replicas behind a proxy that alternates
// requests, which records what the client sent: one client's own, so
// that what it sent and what each replica served are its alone.
type clientDoors struct {
	replicas [2]*tsReplica
	proxy    *httptest.Server

	mu   sync.Mutex
	seen []string // "METHOD rpc-method version status"
}

func newClientFleet(t *testing.T) *clientFleet {
	t.Helper()
	s := natstest.Start(t)
	pr := &probes{}
	workertest.RunWorker(t, s, "clients-w1", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{testTools(pr), conformance.Category()}, nil
	})
	f := &clientFleet{token: "clients-secret-token-0123456789", s: s}
	sum := sha256.Sum256([]byte(f.token))
	ps, err := mcpdoor.ParsePrincipals(fmt.Appendf(nil,
		`{"principals":[{"name":"clients","token_sha256":["%x"],"agent_id":"clients-agent","approval":["confirm_delete"]}]}`, sum))
	if err != nil {
		t.Fatal(err)
	}
	f.ps = ps
	f.key = make([]byte, mcpdoor.SealKeyBytes)
	rand.Read(f.key)

	// A person elsewhere (the console, a gateway) approves every held
	// confirm_delete of the agent while its client's request waits.
	nc := s.Connect(t)
	gw, err := gateway.New(nc, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nc.Subscribe(protocol.Subject(protocol.PrefixOutput, "clients-agent", "*"), func(m *nats.Msg) {
		ev, err := gateway.DecodeEvent(m.Subject, m.Data)
		p, ok := ev.(*protocol.StepPending)
		if err != nil || !ok || len(p.Approvals) != 1 || p.Approvals[0].Name != "confirm_delete" {
			return
		}
		f.approvals.Add(1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := gw.Decide(ctx, "clients-agent", p.TurnID, p.Step, 1, []protocol.Decision{{CallID: p.Approvals[0].CallID, Approved: true, Reason: "the clients test approves"}}); err != nil {
				t.Errorf("decide: %v", err)
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return f
}

// doors starts two door replicas and the recording proxy before them,
// for one client.
func (f *clientFleet) doors(t *testing.T) *clientDoors {
	t.Helper()
	d := &clientDoors{}
	d.replicas[0], d.replicas[1] = tsDoor(t, f.s, f.ps, f.key), tsDoor(t, f.s, f.ps, f.key)
	alt := alternate(t, d.replicas[0].srv, d.replicas[1].srv)
	d.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		alt.Config.Handler.ServeHTTP(sw, r)
		d.mu.Lock()
		d.seen = append(d.seen, fmt.Sprintf("%s %s %s %d", r.Method, m.Method, r.Header.Get("Mcp-Protocol-Version"), sw.status))
		d.mu.Unlock()
	}))
	t.Cleanup(d.proxy.Close)
	return d
}

// take returns what the clients sent since the last take.
func (d *clientDoors) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.seen
	d.seen = nil
	return s
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// clientEvent is a line a client script prints.
type clientEvent struct {
	Event      string          `json:"event"`
	Version    string          `json:"version"`
	Names      []string        `json:"names"`
	Text       string          `json:"text"`
	IsError    bool            `json:"isError"`
	Structured json.RawMessage `json:"structured"`
	Error      string          `json:"error"`
}

// runScript runs a client script of testdata/clients and returns the
// events it printed, by name.
func runScript(t *testing.T, node, script string, env ...string) map[string]clientEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "clients", script))
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	got := map[string]clientEvent{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev clientEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			t.Errorf("%s printed %q", script, sc.Text())
			continue
		}
		got[ev.Event] = ev
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s\nevents: %v", script, err, stderr.String(), got)
	}
	if _, ok := got["done"]; !ok {
		t.Fatalf("%s did not finish its steps: %v\n%s", script, got, stderr.String())
	}
	return got
}

// checkCalls checks what every client script does: list, call, an
// error result, structured output.
func checkCalls(t *testing.T, got map[string]clientEvent, echoText string) {
	t.Helper()
	for _, want := range []string{"echo", "fail", "where", "greet", "test_simple_text"} {
		if !slices.Contains(got["listed"].Names, want) {
			t.Errorf("tools/list has no %s: %v", want, got["listed"].Names)
		}
	}
	if e := got["echo"]; e.Text != echoText || e.IsError {
		t.Errorf("echo: %+v", e)
	}
	if e := got["error"]; !e.IsError || !strings.Contains(e.Text, "failed: on purpose") {
		t.Errorf("fail: %+v, want isError with the tool's text", e)
	}
	if a := got["approved"]; a.Text != "Deleted /tmp/report.txt" || a.IsError {
		t.Errorf("confirm_delete, held and approved elsewhere: %+v", a)
	}
	var where struct {
		Agent string `json:"agent"`
		Turn  string `json:"turn"`
	}
	if s := got["structured"]; json.Unmarshal(s.Structured, &where) != nil || where.Agent != "clients-agent" || where.Turn == "" {
		t.Errorf("where: structuredContent %s, text %q", s.Structured, s.Text)
	}
}

func (d *clientDoors) checkReplicas(t *testing.T) {
	t.Helper()
	a, b := d.replicas[0].served.Swap(0), d.replicas[1].served.Swap(0)
	if a == 0 || b == 0 {
		t.Errorf("requests per replica: %d and %d, want both served", a, b)
	}
}

// Real clients other than the SDKs' own, each against two door replicas
// alternated per request on a real worker: the Vercel AI SDK's MCP
// client (its own Streamable HTTP transport) in both protocol eras, the
// OpenAI Agents SDK's MCPServerStreamableHttp, and the MCP Inspector's
// CLI. Each lists the tools and calls them: a text, a tool error, a
// JSON output as structuredContent. The clients run at once, each
// through doors of its own, on the one worker.
func TestOtherClients(t *testing.T) {
	t.Parallel()
	f := newClientFleet(t)
	env := func(d *clientDoors, dir string, more ...string) []string {
		return append([]string{"CLIENTS_DIR=" + dir, "DOOR_URL=" + d.proxy.URL + mcpdoor.Path, "DOOR_TOKEN=" + f.token}, more...)
	}

	t.Run("vercel-ai-2026", func(t *testing.T) {
		t.Parallel()
		d := f.doors(t)
		node, dir := nodeDeps(t, "clients", "@ai-sdk/mcp")
		got := runScript(t, node, "vercel.mjs", env(d, dir, "DISCOVERY=1")...)
		checkCalls(t, got, "hello from the AI SDK")
		if v := got["connected"].Version; v != "2026-07-28" {
			t.Errorf("the AI SDK negotiated %q, want 2026-07-28 (server/discover)", v)
		}
		if tsText := got["tool-set"].Text; tsText != "via the tool set" {
			t.Errorf("the AI SDK's tool set: %q", tsText)
		}
		if u := got["unknown"]; u.Error == "" && !u.IsError {
			t.Errorf("an unknown tool: %+v", u)
		}
		t.Logf("sent: %v", d.take())
		d.checkReplicas(t)
	})
	t.Run("vercel-ai-2025", func(t *testing.T) {
		t.Parallel()
		d := f.doors(t)
		node, dir := nodeDeps(t, "clients", "@ai-sdk/mcp")
		got := runScript(t, node, "vercel.mjs", env(d, dir, "DISCOVERY=0")...)
		checkCalls(t, got, "hello from the AI SDK")
		if v := got["connected"].Version; v != "2025-11-25" {
			t.Errorf("the AI SDK negotiated %q, want 2025-11-25 (initialize)", v)
		}
		t.Logf("sent: %v", d.take())
		d.checkReplicas(t)
	})
	t.Run("openai-agents", func(t *testing.T) {
		t.Parallel()
		d := f.doors(t)
		node, dir := nodeDeps(t, "clients", "@openai/agents")
		got := runScript(t, node, "agents.mjs", env(d, dir)...)
		checkCalls(t, got, "hello from the Agents SDK")
		t.Logf("sent: %v", d.take())
		d.checkReplicas(t)
	})
	t.Run("inspector-cli", func(t *testing.T) {
		t.Parallel()
		d := f.doors(t)
		node, dir := nodeDeps(t, "inspector", "@modelcontextprotocol/inspector")
		// The package's mcp-inspector command, as `npx @modelcontextprotocol/inspector --cli` runs it.
		bin := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
		// exit is the status the CLI should exit with: 5 when the tool
		// answered isError.
		inspect := func(exit int, args ...string) map[string]any {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, append([]string{bin, "--cli", d.proxy.URL + mcpdoor.Path, "--transport", "http",
				"--header", "Authorization: Bearer " + f.token}, args...)...)
			cmd.Env = append(os.Environ(), "MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "mcp.json"), "HOME="+t.TempDir())
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != exit {
				t.Fatalf("inspector %v: %v\n%s\n%s", args, err, stdout.String(), stderr.String())
			}
			var out map[string]any
			if err := json.NewDecoder(bytes.NewReader(stdout.Bytes())).Decode(&out); err != nil {
				t.Fatalf("inspector %v printed %q: %v", args, stdout.String(), err)
			}
			return out
		}
		list := inspect(0, "--method", "tools/list")
		var names []string
		for _, tl := range list["tools"].([]any) {
			names = append(names, tl.(map[string]any)["name"].(string))
		}
		if !slices.Contains(names, "echo") || !slices.Contains(names, "greet") {
			t.Errorf("inspector tools/list: %v", names)
		}
		call := inspect(0, "--method", "tools/call", "--tool-name", "greet", "--tool-arg", "name=Ada")
		if b, _ := json.Marshal(call["content"]); !strings.Contains(string(b), "Hello, Ada!") {
			t.Errorf("inspector tools/call greet: %v", call)
		}
		failed := inspect(5, "--method", "tools/call", "--tool-name", "fail", "--tool-arg", "text=on purpose")
		if failed["isError"] != true {
			t.Errorf("inspector tools/call fail: %v", failed)
		}
		// resources/list and prompts/list answer empty lists through it
		// too; TestClientProtocolCompat checks them, without a Node start each.
		t.Logf("sent: %v", d.take())
		d.checkReplicas(t)
	})
}
