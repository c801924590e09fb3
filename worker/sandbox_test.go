package worker

import (
	"bytes"
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/sandbox"
)

func TestSandboxFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--command-sandbox", "chroot"}, "--command-sandbox must be bwrap or none"},
		{[]string{"--command-sandbox", "none", "--command-network"}, "--command-network needs --command-sandbox bwrap"},
		{[]string{"--command-max-procs", "2"}, "process limit 2 is below 8"},
		{[]string{"--command-uid", "0"}, "--command-uid must be an unprivileged user"},
		// Zero is not read as the default, as with every other flag.
		{[]string{"--command-max-procs", "0"}, "--command-max-procs must be more than 0"},
		{[]string{"--command-max-memory", "0"}, "--command-max-memory must be more than 0"},
		{[]string{"--command-max-cpu", "0"}, "--command-max-cpu must be more than 0"},
		{[]string{"--command-max-file-bytes", "0"}, "--command-max-file-bytes must be more than 0"},
		{[]string{"--command-max-open-files", "0"}, "--command-max-open-files must be more than 0"},
		{[]string{"--command-tmp-bytes", "0"}, "--command-tmp-bytes must be more than 0"},
		{[]string{"--command-max-cpu", "-1"}, "the CPU limit must be at least 1 s"},
		{[]string{"--command-memory", "0"}, "--command-memory must be more than 0"},
		{[]string{"--command-memory", "1000"}, "command memory 1000 is below 64 MiB"},
		{[]string{"--command-pids", "0"}, "--command-pids must be more than 0"},
		{[]string{"--command-cpu", "0"}, "--command-cpu must be more than 0"},
		{[]string{"--cgroup-root", "relative/dir"}, "--cgroup-root must be auto, none or an absolute"},
		{[]string{"--command-proxy-idle", "0"}, "--command-proxy-idle must be more than 0"},
		{[]string{"--command-proxy-conns", "0"}, "--command-proxy-conns must be more than 0"},
		{[]string{"--command-proxy-idle", "10ms"}, "--command-proxy-idle must be at least 1s (not 10ms)"},
		{[]string{"--command-proxy-conns", "-3"}, "--command-proxy-conns at least 1 (not -3)"},
		{[]string{"--mcp-memory", "1000"}, "--mcp-memory must be at least 16 MiB (not 1000)"},
		{[]string{"--mcp-pids", "0"}, "--mcp-pids at least 8 (not 0)"},
		{[]string{"--mcp-cpu", "0"}, "--mcp-cpu at least 0.01 (not 0)"},
		{[]string{"--mcp-cpu", "NaN"}, "--mcp-cpu at least 0.01 (not NaN)"},
	} {
		if err := newProgram(Config{}).ParseFlags(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	m := newProgram(Config{})
	if err := m.ParseFlags([]string{"--command-network", "--command-ro-bind", "/opt, /srv"}); err != nil {
		t.Fatal(err)
	}
	if m.Sandbox.Mode != "bwrap" || !m.Sandbox.Network || strings.Join(m.Sandbox.Config.ReadOnly, ",") != "/opt,/srv" {
		t.Errorf("%+v", m.Sandbox)
	}
	if c := m.Sandbox.Config; c.ProxyIdle != sandbox.DefaultProxyIdle || c.ProxyConns != sandbox.DefaultProxyConns {
		t.Errorf("proxy defaults: idle %s, conns %d", c.ProxyIdle, c.ProxyConns)
	}
	if l := m.MCPBounds.Limits; l.MemoryBytes != 512<<20 || l.Pids != 256 || l.CPU != 1 {
		t.Errorf("MCP server limits by default: %+v", l)
	}
	m = newProgram(Config{})
	if err := m.ParseFlags([]string{"--command-proxy-idle", "90s", "--command-proxy-conns", "8", "--mcp-memory", "268435456", "--mcp-pids", "64", "--mcp-cpu", "0.5"}); err != nil {
		t.Fatal(err)
	}
	if c, l := m.Sandbox.Config, m.MCPBounds.Limits; c.ProxyIdle != 90*time.Second || c.ProxyConns != 8 || l.MemoryBytes != 256<<20 || l.Pids != 64 || l.CPU != 0.5 {
		t.Errorf("proxy %s %d, MCP limits %+v", c.ProxyIdle, c.ProxyConns, l)
	}
}

// A machine without bubblewrap still runs the worker: the sandbox is
// reported missing in one line with the way to install it, and
// run_command is not offered.
func TestSandboxMissing(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	flags := func(args ...string) commandSandbox {
		t.Helper()
		m := newProgram(Config{})
		if err := m.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return m.Sandbox
	}
	c := flags()
	c.Config.Bwrap = "/nonexistent/bwrap"
	sb, err := c.start(context.Background(), log, "")
	if err != nil || sb != nil {
		t.Fatalf("start: %v, %v", sb, err)
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "run_command is not offered") || !strings.Contains(logs.String(), "apt-get install -y bubblewrap") {
		t.Errorf("%d lines: %s", n, logs.String())
	}
	// none says, at every start, that commands are not confined.
	logs.Reset()
	c = flags("--command-sandbox", "none")
	if sb, err := c.start(context.Background(), log, ""); sb != nil || err != nil || !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("none: %v %v %s", sb, err, logs.String())
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("SKIPPING the working sandbox: bwrap is not installed (apt-get install -y bubblewrap)")
	}
	logs.Reset()
	c = flags("--command-network")
	sb, err = c.start(context.Background(), log, "")
	if err != nil || sb == nil {
		t.Fatalf("start: %v %v %s", sb, err, logs.String())
	}
	sb.Close()
}

// The start says in one line whether commands get cgroups of their own;
// an explicit --cgroup-root that cannot be used stops the start.
func TestSandboxCgroups(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("SKIPPING: bwrap is not installed (apt-get install -y bubblewrap)")
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	start := func(args ...string) (*sandbox.Sandbox, error) {
		t.Helper()
		logs.Reset()
		m := newProgram(Config{})
		if err := m.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return m.Sandbox.start(context.Background(), log, "")
	}
	sb, err := start("--cgroup-root", "none", "--command-memory", "256000000")
	if err != nil || sb == nil {
		t.Fatalf("none: %v %v %s", sb, err, logs.String())
	}
	if l := sb.Limits(); sb.Cgroups() || strings.Count(logs.String(), "no cgroup of their own") != 1 || l.TmpBytes != 64000000 || l.MemoryBytes != 128000000 {
		t.Errorf("none: cgroups %v, limits %+v, logs %s", sb.Cgroups(), l, logs.String())
	}
	sb.Close()
	if _, err := start("--cgroup-root", "/nonexistent/cgroup"); err == nil || !strings.Contains(err.Error(), "--cgroup-root /nonexistent/cgroup") {
		t.Errorf("a missing --cgroup-root: %v", err)
	}
	sb, err = start()
	if err != nil || sb == nil {
		t.Fatalf("auto: %v %v %s", sb, err, logs.String())
	}
	defer sb.Close()
	if sb.Cgroups() != strings.Contains(logs.String(), "each command runs in a cgroup of its own") || sb.Cgroups() == strings.Contains(logs.String(), "no cgroup of their own") {
		t.Errorf("auto: cgroups %v, logs %s", sb.Cgroups(), logs.String())
	}
	t.Logf("auto: %s", logs.String())
}
