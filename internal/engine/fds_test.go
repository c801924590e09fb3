package engine_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// TestInheritedDescriptors starts the worker binary as a careless wrapper
// script would, with a secret file and a writable host file open on
// descriptors 3 and 4 and not close-on-exec, and checks that neither a
// sandboxed command nor an MCP stdio child gets them: each lists
// /proc/self/fd and tries to read and write through /proc/self/fd/N.
func TestInheritedDescriptors(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs a worker process")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed")
	}
	const secret = "another-agent-s-secret-51f0"
	dir := t.TempDir()
	secretPath := filepath.Join(dir, "secret")
	hostPath := filepath.Join(dir, "host-file")
	for _, p := range []string{secretPath, hostPath} {
		if err := os.WriteFile(p, []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sf, err := os.Open(secretPath)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	hf, err := os.OpenFile(hostPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()

	// The MCP child reports what it got to a file, then waits.
	report := filepath.Join(dir, "mcp-report")
	script := `{ ls /proc/self/fd | tr '\n' ' '; echo; for n in 3 4 5 6 7 8 9; do cat /proc/self/fd/$n 2>/dev/null; echo x >/proc/self/fd/$n 2>/dev/null; done; } >"$REPORT.tmp"; mv "$REPORT.tmp" "$REPORT"; exec sleep 60`
	cfg, _ := json.Marshal(map[string]any{"servers": map[string]any{"probe": map[string]any{
		"command": "/bin/sh", "args": []string{"-c", script}, "env": map[string]string{"REPORT": report},
		"connect_timeout": "2s",
	}}})
	cfgPath := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "homes")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}

	bin := buildWorker(t)
	s := natstest.Start(t)
	p := startProcessFiles(t, bin, s.ClientURL(), "fds", []*os.File{sf, hf},
		"--computer-root", root, "--mcp-config", cfgPath)
	g := newGateway(t, s)
	waitForInstances(t, g.nc, 1)

	ev := g.watch("fdagent", "t1")
	msg := step("fdagent", "t1", 0, fc("ls", "run_command",
		`{"command":"ls /proc/self/fd | tr '\\n' ' '; echo; for n in 3 4 5 6 7 8 9; do cat /proc/self/fd/$n 2>/dev/null; echo x >/proc/self/fd/$n 2>/dev/null; done; echo end"}`))
	ctx := msg["context"].(map[string]any)
	ctx["bindings"].(map[string]any)[computer.Binding] = true
	ctx["mcp_servers"] = []string{"probe"}
	g.publish(protocol.Subject(protocol.PrefixCall, "fdagent", "t1"), protocol.StepMsgID("fdagent", "t1", 0), msg)
	outs, _ := ev.untilDone()
	out := outs["ls"]
	if out.Status != "ok" {
		t.Fatalf("run_command: %s", out.Raw)
	}
	text := string(out.Raw)
	if strings.Contains(text, secret) {
		t.Errorf("the command read the secret through an inherited descriptor: %s", text)
	}
	if !strings.Contains(text, "end") {
		t.Errorf("the command's output is not all there: %s", text)
	}
	var item struct{ Output string }
	_ = json.Unmarshal(out.Item, &item)
	if fds := strings.Fields(strings.SplitN(item.Output, "\n", 2)[0]); len(fds) > 4 {
		t.Errorf("the command has descriptors %v, want 0 1 2 and ls's own", fds)
	}
	t.Logf("command: %s", item.Output)

	var got []byte
	waitFor(t, func() bool {
		got, err = os.ReadFile(report)
		return err == nil
	}, "the MCP child's report")
	if strings.Contains(string(got), secret) {
		t.Errorf("the MCP child read the secret through an inherited descriptor: %q", got)
	}
	fds := strings.Fields(strings.SplitN(string(got), "\n", 2)[0])
	// 0, 1, 2 and ls's own directory.
	if len(fds) > 4 {
		t.Errorf("the MCP child has descriptors %v, want 0 1 2 and ls's own", fds)
	}
	t.Logf("mcp child: %q", got)
	if b, _ := os.ReadFile(hostPath); string(b) != secret {
		t.Errorf("the host file was written through an inherited descriptor: %q", b)
	}
	// The rig's own check: the descriptors were open in the worker.
	if n := countOpen(t, p.cmd.Process.Pid, secretPath); n == 0 {
		t.Errorf("the worker does not hold the secret file open: the test proves nothing")
	}
}

// countOpen counts the descriptors of process pid open on path.
func countOpen(t *testing.T, pid int, path string) int {
	t.Helper()
	d := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(d, e.Name())); err == nil && l == path {
			n++
		}
	}
	return n
}

// startProcessFiles is startProcess with files the worker inherits as
// descriptors 3, 4, … without close-on-exec.
func startProcessFiles(t *testing.T, bin, url, name string, files []*os.File, extra ...string) *process {
	t.Helper()
	p := &process{name: name, markDir: t.TempDir()}
	p.cmd = exec.Command(bin, append([]string{"--nats-url", url, "--name", name, "--diagnostics", "--mark-dir", p.markDir,
		"--ack-wait", "2s", "--max-deliver", "5", "--grace", "2s", "--log-format", "json"}, extra...)...)
	p.cmd.ExtraFiles = files
	logFile, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = logFile
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("%s log:\n%s", name, b)
		}
	})
	return p
}
