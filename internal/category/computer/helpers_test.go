package computer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"
	"github.com/agentbull/toolruntime/tool"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/cgroup"
	"github.com/agentbull/toolruntime/internal/sandbox"
	"github.com/agentbull/toolruntime/internal/tools"
)

const agent = "a1"

// newCategory builds the category over a fresh root (unless cfg names one)
// and closes it with the test.
func newCategory(t *testing.T, cfg computer.Config) *computer.Category {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = filepath.Join(t.TempDir(), "homes")
	}
	// Commands run sandboxed, as the worker runs them, wherever bwrap is
	// (CI always); elsewhere run_command is not offered and its tests
	// skip (needSandbox).
	if cfg.Sandbox == nil && !cfg.Unconfined && hasBwrap() {
		cfg.Sandbox = sharedSandbox(t)
	}
	c, err := computer.New(cfg)
	if err != nil {
		t.Fatalf("computer.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// shared is the default sandbox (sandbox.Config{}; with a cgroup per
// command when helperEnv is set, as the worker's default is, so that a
// home's commands run in its helper: see TestEscapesInHelpers) the
// package's tests share: a Sandbox without Network holds no state but its copy of /etc,
// which commands see read-only, and New copies some 700 entries of /etc,
// a cost each test and subtest would otherwise pay again under -race.
// TestMain closes it.
var shared struct {
	once sync.Once
	sb   *sandbox.Sandbox
	cg   *cgroup.Manager
	err  error
}

// sharedSandbox is the package's default sandbox, made at first use.
func sharedSandbox(t testing.TB) *sandbox.Sandbox {
	t.Helper()
	shared.once.Do(func() {
		if os.Getenv(helperEnv) != "" {
			m, err := cgroup.Open(cgroup.Options{Root: "auto"})
			if err != nil {
				shared.err = err
				return
			}
			shared.cg = m
		}
		shared.sb, shared.err = sandbox.New(sandbox.Config{Cgroups: shared.cg})
	})
	if shared.err != nil {
		t.Fatalf("sandbox.New: %v", shared.err)
	}
	return shared.sb
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.sb != nil {
		if err := shared.sb.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing the shared sandbox:", err)
			code = 1
		}
	}
	if shared.cg != nil {
		if err := shared.cg.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing the shared sandbox's cgroups:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func hasBwrap() bool {
	_, err := exec.LookPath("bwrap")
	return err == nil
}

// needSandbox skips t, loudly, where bwrap is not installed: run_command
// is not offered without it. CI installs it, so there nothing skips.
func needSandbox(t testing.TB) {
	t.Helper()
	if !hasBwrap() {
		t.Skip("SKIPPING: bwrap is not installed (scripts/test-deps.sh installs it and socat, or apt-get install -y bubblewrap socat); run_command and its sandbox are NOT tested on this machine")
	}
}

func findTool(t *testing.T, c *computer.Category, name string) *tool.Tool {
	t.Helper()
	for _, tl := range c.Tools() {
		if tl.Name() == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

// callCtx is the context the dispatcher gives a call of agent's turn t1.
func callCtx(ctx context.Context, agentID, callID string) context.Context {
	return tools.WithCall(ctx, tool.Call{AgentID: agentID, TurnID: "t1", Step: 0, CallID: callID})
}

// run prepares and runs one call of agent a1 as the dispatcher would.
func run(t *testing.T, c *computer.Category, name string, args any) (tool.Result, error) {
	t.Helper()
	return runCtx(t, context.Background(), c, agent, name, args)
}

func runCtx(t *testing.T, ctx context.Context, c *computer.Category, agentID, name string, args any) (tool.Result, error) {
	t.Helper()
	s, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		s = string(b)
	}
	inv, err := tools.Prepare(findTool(t, c, name), s, 0)
	if err != nil {
		return tool.Result{}, err
	}
	return inv.Run(callCtx(ctx, agentID, "call_"+name))
}

func kindOf(err error) tool.Kind {
	var te *tool.Error
	if errors.As(err, &te) {
		return te.Kind
	}
	return ""
}

// home is agent's home under c, created as a call would create it.
func home(t *testing.T, c *computer.Category, agentID string) string {
	t.Helper()
	if _, err := runCtx(t, context.Background(), c, agentID, computer.ListFilesName, `{}`); err != nil {
		t.Fatalf("opening the home of %s: %v", agentID, err)
	}
	return filepath.Join(c.Root(), agentID)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitFor polls cond until it holds or the deadline passes: it waits for
// a state, never for a guessed duration.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// golden compares got with testdata/name (see internal/golden).
var golden = goldenfile.IndentedJSON
