package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"
	"github.com/agentbull/toolruntime/tool"

	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// golden compares got with testdata/name (see internal/golden).
var golden = goldenfile.Bytes

func indent(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

func textContext(servers ...string) protocol.Context {
	return protocol.Context{Kind: protocol.KindText, MCPServers: servers}
}

// assemble builds a turn's set with the MCP category alone.
func assemble(t *testing.T, m *mcp.Manager, c protocol.Context) *turn.Set {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	set, err := turn.NewAssembler(mcp.Category(m, nil)).Assemble(ctx, turn.Env{AgentID: "a1", TurnID: "t1", Context: c})
	if err != nil {
		t.Fatalf("Assemble: %v", err)
	}
	return set
}

// dispatch runs one function call through the dispatcher, as a step
// would, with every deferred tool of the set loaded.
func dispatch(ctx context.Context, set *turn.Set, ns, name, args string) *turn.Outcome {
	loaded := map[string]bool{}
	for _, t := range set.Deferred() {
		loaded[turn.ToolKey(t.Spec().Namespace, t.Name())] = true
	}
	d := turn.Dispatcher{Timeout: 30 * time.Second}
	res := d.Run(ctx, set, turn.Input{AgentID: "a1", TurnID: "t1", Loaded: loaded, Calls: []protocol.CallItem{
		{Type: protocol.ItemFunctionCall, CallID: "c1", Namespace: ns, Name: name, Arguments: args},
	}})
	return res.Outcomes[0]
}

func output(t *testing.T, o *turn.Outcome) string {
	t.Helper()
	var it protocol.FunctionCallOutput
	if err := json.Unmarshal(o.Item, &it); err != nil {
		t.Fatalf("item %s: %v", o.Item, err)
	}
	return it.Output
}

func kind(o *turn.Outcome) tool.Kind {
	if o.Err == nil {
		return ""
	}
	return o.Err.Kind
}

// transports runs f against the Go server over stdio and over HTTP.
func transports(t *testing.T, f func(t *testing.T, cfg mcp.ServerConfig, marks string, kill func(m *mcp.Manager))) {
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		cfg, marks := stdioConfig(t)
		f(t, cfg, marks, func(m *mcp.Manager) {
			pid := m.ChildPID("go")
			if pid == 0 {
				t.Fatal("no child to kill")
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		hs := startHTTPServer(t)
		f(t, hs.config(), hs.marks, func(*mcp.Manager) { hs.kill() })
	})
}

// TestCatalogGolden pins the catalog of two servers: one deferred (the
// default) described by its instructions, one loaded up front with a
// configured description and one tool deferred. The tool search output
// for a query is pinned too.
func TestCatalogGolden(t *testing.T) {
	t.Parallel()
	notes, _ := stdioConfig(t)
	calc, _ := stdioConfig(t)
	calc.Description = "Arithmetic and echoes."
	calc.Defer = new(false)
	calc.Tools = map[string]mcp.ToolConfig{"echo": {Defer: new(true)}, "grow": {Disabled: true}}
	m := newManager(t, map[string]mcp.ServerConfig{"notes": notes, "calc": calc})
	set := assemble(t, m, textContext("notes", "calc", "nowhere"))
	catalog, digest := set.Catalog()
	reply, _ := json.Marshal(protocol.CatalogReply{Tools: catalog, Digest: digest, Notes: set.Notes})
	golden(t, "catalog.json", indent(t, reply))

	// The same context gives the same bytes from the cached tools.
	again, digest2 := assemble(t, m, textContext("calc", "notes", "nowhere")).Catalog()
	if !bytes.Equal(again, catalog) || digest2 != digest {
		t.Error("the catalog changed between two turns with the same context")
	}

	d := turn.Dispatcher{}
	res := d.Run(context.Background(), set, turn.Input{AgentID: "a1", TurnID: "t1", Calls: []protocol.CallItem{
		{Type: protocol.ItemToolSearchCall, CallID: "s1", Execution: "client", Search: json.RawMessage(`{"query":"write a note"}`)},
	}})
	golden(t, "search.json", indent(t, res.Outcomes[0].Item))
	if got := res.Outcomes[0].Loaded(); !slices.Contains(got, "notes.write_note") {
		t.Errorf("search for writing a note loaded %v", got)
	}
}

func TestAnnotations(t *testing.T) {
	t.Parallel()
	cfg, _ := stdioConfig(t)
	cfg.Timeout = mcp.Duration(20 * time.Second)
	cfg.Tools = map[string]mcp.ToolConfig{"slow": {Timeout: mcp.Duration(time.Second), Defer: new(false)}}
	m := newManager(t, map[string]mcp.ServerConfig{"go": cfg})
	set := assemble(t, m, textContext("go"))
	tests := []struct {
		name                  string
		readOnly, destructive bool
		mode                  tool.Mode
		deferred              bool
		timeout               time.Duration
	}{
		{"echo", true, false, tool.Parallel, true, 20 * time.Second},
		{"slow", true, false, tool.Parallel, false, time.Second},
		{"write_note", false, true, tool.Sequential, true, 20 * time.Second},
		{"append_note", false, false, tool.Sequential, true, 20 * time.Second},
		// No annotations: the MCP defaults, not read-only and destructive.
		{"grow", false, true, tool.Sequential, true, 20 * time.Second},
	}
	for _, tt := range tests {
		tool := set.Lookup("go", tt.name)
		if tool == nil {
			t.Errorf("no tool %s", tt.name)
			continue
		}
		sp := tool.Spec()
		if sp.ReadOnly != tt.readOnly || sp.Destructive != tt.destructive || sp.ExecutionMode != tt.mode ||
			sp.DeferLoading != tt.deferred || sp.Timeout != tt.timeout {
			t.Errorf("%s: read-only %v, destructive %v, %s, deferred %v, timeout %s; want %v, %v, %s, %v, %s", tt.name,
				sp.ReadOnly, sp.Destructive, sp.ExecutionMode, sp.DeferLoading, sp.Timeout,
				tt.readOnly, tt.destructive, tt.mode, tt.deferred, tt.timeout)
		}
		if sp.Namespace != "go" || sp.NamespaceDescription != "A small server for tests: echo text, add numbers, wait, fail, draw and take notes." {
			t.Errorf("%s: namespace %q %q", tt.name, sp.Namespace, sp.NamespaceDescription)
		}
	}
	for _, n := range set.Notes {
		t.Log("note:", n)
	}
	for _, left := range []string{`tool "notes.read" is left out`, `tool "broken" is left out`} {
		if !slices.ContainsFunc(set.Notes, func(n string) bool { return strings.Contains(n, left) }) {
			t.Errorf("no note saying %s: %q", left, set.Notes)
		}
	}
}

func TestCalls(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, cfg mcp.ServerConfig, _ string, _ func(*mcp.Manager)) {
		m := newManager(t, map[string]mcp.ServerConfig{"go": cfg})
		set := assemble(t, m, textContext("go"))
		ctx := context.Background()
		tests := []struct {
			name, args string
			kind       tool.Kind
			output     string
			details    string
		}{
			{name: "echo", args: `{"text":"hello"}`, output: "hello"},
			{name: "add", args: `{"a":2,"b":40}`, output: `{"sum":42}`, details: `{"sum":42}`},
			{name: "fail", args: `{}`, kind: tool.ToolError, output: "Error (tool_error): it failed on purpose"},
			{name: "draw", args: ``, output: "a picture:\n[resource note://1, text/plain]\nthe caption\n[left out: audio/wav content (16 bytes) from the MCP tool go.draw, because the model reads only images"},
			// Checked against the server's schema before anything is sent.
			{name: "echo", args: `{"text":5}`, kind: tool.InvalidArguments, output: "- /text: "},
		}
		for _, tt := range tests {
			o := dispatch(ctx, set, "go", tt.name, tt.args)
			if kind(o) != tt.kind || !strings.Contains(output(t, o), tt.output) {
				t.Errorf("%s(%s) = %s %q; want %q containing %q", tt.name, tt.args, kind(o), output(t, o), tt.kind, tt.output)
			}
			if tt.details != "" {
				if b, _ := json.Marshal(o.Details); string(b) != tt.details {
					t.Errorf("%s details %s, want %s", tt.name, b, tt.details)
				}
			}
		}
		// A deferred tool that tool search did not load is not run.
		d := turn.Dispatcher{}
		res := d.Run(ctx, set, turn.Input{AgentID: "a1", TurnID: "t1", Calls: []protocol.CallItem{
			{Type: protocol.ItemFunctionCall, CallID: "c1", Namespace: "go", Name: "echo", Arguments: `{"text":"x"}`},
		}})
		if k := kind(res.Outcomes[0]); k != tool.NotLoaded {
			t.Errorf("an unloaded deferred tool gave %q, want not_loaded", k)
		}
	})
}

// TestCancel: aborting the call's context (turn.cancel) and its timeout
// both reach the server as notifications/cancelled, whose handler sees
// its context end.
func TestCancel(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, cfg mcp.ServerConfig, marks string, _ func(*mcp.Manager)) {
		cfg.Tools = map[string]mcp.ToolConfig{"slow_write": {Timeout: mcp.Duration(500 * time.Millisecond)}}
		m := newManager(t, map[string]mcp.ServerConfig{"go": cfg})
		set := assemble(t, m, textContext("go"))

		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan *turn.Outcome, 1)
		go func() { done <- dispatch(ctx, set, "go", "slow", `{"ms":60000,"tag":"aborted"}`) }()
		waitMark(t, marks, "start aborted")
		cancel(turn.ErrCancelled)
		select {
		case o := <-done:
			if kind(o) != tool.Aborted {
				t.Errorf("cancelled call: %s %q, want aborted", kind(o), output(t, o))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the cancelled call did not end")
		}
		waitMark(t, marks, "cancelled aborted")

		o := dispatch(context.Background(), set, "go", "slow_write", `{"ms":60000,"tag":"late"}`)
		if kind(o) != tool.Timeout {
			t.Errorf("slow call past its timeout: %s %q, want timeout", kind(o), output(t, o))
		}
		waitMark(t, marks, "cancelled late")
	})
}

// TestServerKilled: a server that dies under a running call fails that
// call (a read-only one is sent again on a new session), and the next
// call reconnects.
func TestServerKilled(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, cfg mcp.ServerConfig, marks string, kill func(*mcp.Manager)) {
		m := newManager(t, map[string]mcp.ServerConfig{"go": cfg})
		set := assemble(t, m, textContext("go"))
		firstPID := output(t, dispatch(context.Background(), set, "go", "pid", ``))

		done := make(chan *turn.Outcome, 1)
		go func() { done <- dispatch(context.Background(), set, "go", "slow_write", `{"ms":60000,"tag":"w1"}`) }()
		waitMark(t, marks, "start w1")
		kill(m)
		o := <-done
		if kind(o) != tool.ToolError || !strings.Contains(output(t, o), "may or may not have taken effect") {
			t.Errorf("call whose server died: %s %q", kind(o), output(t, o))
		}
		if n := countMarks(marks, "start w1"); n != 1 {
			t.Errorf("a call that is not read-only was sent %d times", n)
		}

		// The next call gets a new session.
		if o := dispatch(context.Background(), set, "go", "echo", `{"text":"back"}`); output(t, o) != "back" {
			t.Errorf("call after the kill: %s %q", kind(o), output(t, o))
		}
		if cfg.Command != "" {
			if pid := output(t, dispatch(context.Background(), set, "go", "pid", ``)); pid == firstPID {
				t.Errorf("still talking to process %s", pid)
			}
			n, _ := strconv.Atoi(firstPID)
			waitReaped(t, n)
		}

		// A read-only call cut short by the server's death is sent again.
		go func() { done <- dispatch(context.Background(), set, "go", "slow", `{"ms":300,"tag":"r1"}`) }()
		waitMark(t, marks, "start r1")
		kill(m)
		if o := <-done; o.Err != nil || output(t, o) != "worked r1" {
			t.Errorf("read-only call whose server died: %s %q, want it run again", kind(o), output(t, o))
		}
		if n := countMarks(marks, "start r1"); n != 2 {
			t.Errorf("the read-only call started %d times, want 2", n)
		}
	})
}

func countMarks(dir, line string) int {
	n := 0
	for _, m := range readMarks(dir) {
		if m == strings.ReplaceAll(line, " ", "_") {
			n++
		}
	}
	return n
}

// waitReaped waits until pid is gone: not running and not a zombie.
func waitReaped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("process %d was not reaped", pid)
}

// TestServerDown: a server that cannot be reached costs the catalog a
// note, not the turn; once a server listed its tools, they stay in the
// catalog while it is down and their calls get error outputs; attempts
// back off; and the server is used again once it is back.
func TestServerDown(t *testing.T) {
	hs := startHTTPServer(t)
	m := newManager(t, map[string]mcp.ServerConfig{
		"gone":  {Command: filepath.Join(t.TempDir(), "no-such-server")},
		"later": hs.config(),
	})
	set := assemble(t, m, textContext("gone", "later"))
	if set.Lookup("later", "echo") == nil {
		t.Fatal("the reachable server's tools are missing")
	}
	if !strings.Contains(set.Notes[0], `mcp server "gone" is unavailable`) || !strings.Contains(set.Notes[0], "left out of this turn") {
		t.Errorf("notes %q", set.Notes)
	}
	for _, tool := range set.Tools() {
		if tool.Spec().Namespace == "gone" {
			t.Errorf("a tool of the unreachable server: %s", tool.Name())
		}
	}

	hs.kill()
	hs.Close() // down for good: connections are refused
	// The catalog comes from the session's cached list; the call finds
	// the server gone, tries a new session once, and reports it.
	set = assemble(t, m, textContext("later"))
	o := dispatch(context.Background(), set, "later", "echo", `{"text":"x"}`)
	if kind(o) != tool.ToolError || !strings.Contains(output(t, o), `mcp server "later" is unavailable`) {
		t.Errorf("call to a server that is down: %s %q", kind(o), output(t, o))
	}
	t.Log(output(t, o))
	set = assemble(t, m, textContext("later"))
	if set.Lookup("later", "echo") == nil || !strings.Contains(set.Notes[0], "listed last") {
		t.Fatalf("catalog of a server that went down: %d tools, notes %q", len(set.Tools()), set.Notes)
	}
	start := time.Now()
	o = dispatch(context.Background(), set, "later", "echo", `{"text":"x"}`)
	if !strings.Contains(output(t, o), "next attempt in") || time.Since(start) > 100*time.Millisecond {
		t.Errorf("a call during the backoff took %s: %q", time.Since(start), output(t, o))
	}
}

// TestListChanged: tools/list_changed makes the next turn list again.
func TestListChanged(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, cfg mcp.ServerConfig, _ string, _ func(*mcp.Manager)) {
		m := newManager(t, map[string]mcp.ServerConfig{"go": cfg})
		set := assemble(t, m, textContext("go"))
		echo := set.Lookup("go", "echo")
		if set.Lookup("go", "extra") != nil {
			t.Fatal("extra before grow")
		}
		if o := dispatch(context.Background(), set, "go", "grow", ``); o.Err != nil {
			t.Fatalf("grow: %q", output(t, o))
		}
		deadline := time.Now().Add(10 * time.Second)
		for set.Lookup("go", "extra") == nil {
			if time.Now().After(deadline) {
				t.Fatal("the new tool never showed up")
			}
			time.Sleep(50 * time.Millisecond)
			set = assemble(t, m, textContext("go"))
		}
		if o := dispatch(context.Background(), set, "go", "extra", ``); output(t, o) != "extra" {
			t.Errorf("extra: %q", output(t, o))
		}
		if set.Lookup("go", "echo") == echo {
			t.Error("a changed list kept the old tools (a rebuild must make new ones)")
		}
	})
}

// TestToolsReused: turns share the tools built from one list, across a
// reconnect too, so schemas are compiled once per list.
func TestToolsReused(t *testing.T) {
	t.Parallel()
	cfg, _ := stdioConfig(t)
	m := newManager(t, map[string]mcp.ServerConfig{"go": cfg})
	first := assemble(t, m, textContext("go")).Tools()
	second := assemble(t, m, textContext("go")).Tools()
	if !slices.Equal(first, second) {
		t.Error("the second turn built its tools again")
	}
	if err := syscall.Kill(m.ChildPID("go"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		third := assemble(t, m, textContext("go"))
		if len(third.Notes) == 2 && m.ChildPID("go") != 0 { // the two tools left out
			if !slices.Equal(first, third.Tools()) {
				t.Error("the same list after a reconnect built new tools")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new session: notes %q", third.Notes)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClose: Close ends the sessions and reaps the children.
func TestClose(t *testing.T) {
	t.Parallel()
	cfg, _ := stdioConfig(t)
	m := newManager(t, map[string]mcp.ServerConfig{"go": cfg})
	set := assemble(t, m, textContext("go"))
	pid := m.ChildPID("go")
	if pid == 0 {
		t.Fatal("no child")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	waitReaped(t, pid)
	o := dispatch(context.Background(), set, "go", "echo", `{"text":"x"}`)
	if kind(o) != tool.ToolError || !strings.Contains(output(t, o), mcp.ErrClosed.Error()) {
		t.Errorf("call after Close: %s %q", kind(o), output(t, o))
	}
}

// TestTaskTurnsGetNothing: workflow task turns have a fixed catalog.
func TestTaskTurnsGetNothing(t *testing.T) {
	cfg, _ := stdioConfig(t)
	m := newManager(t, map[string]mcp.ServerConfig{"go": cfg})
	set := assemble(t, m, protocol.Context{Kind: protocol.KindWorkflowTask, MCPServers: []string{"go"}})
	if len(set.Tools()) != 0 || m.ChildPID("go") != 0 {
		t.Errorf("a task turn got %d tools (child %d)", len(set.Tools()), m.ChildPID("go"))
	}
}

func ExampleParseConfig() {
	cfg, err := mcp.ParseConfig([]byte(`{"servers": {
		"files": {"command": "mcp-server-filesystem", "args": ["/srv/data"], "description": "The shared data folder."},
		"github": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"},
		           "timeout": "30s", "tools": {"search_issues": {"defer": false}}}
	}}`))
	fmt.Println(err, len(cfg.Servers), time.Duration(cfg.Servers["github"].Timeout))
	// Output: <nil> 2 30s
}
