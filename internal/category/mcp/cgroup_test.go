package mcp_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/cgroup"
	"github.com/agentbull/toolruntime/tool"
)

type holdIn struct {
	MB int `json:"mb" jsonschema:"MiB to allocate and hold"`
}

type spinIn struct {
	MS int `json:"ms" jsonschema:"milliseconds of CPU time to spin for, on two threads"`
}

// holding keeps what hold allocated reachable.
var holding [][]byte

// newHostileCgroupServer is a stdio server whose tools take what a
// cgroup bounds: memory held, memory without end, processes without
// end, and CPU.
func newHostileCgroupServer() *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "hog", Version: "1.0.0"}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	// Off the Go heap, so that a -race build's shadow memory does not
	// count beside it.
	alloc := func(mb int) {
		b, err := syscall.Mmap(-1, 0, mb<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			panic(err)
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		holding = append(holding, b)
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "hold", Description: "Allocate and hold memory."},
		func(_ context.Context, _ *sdk.CallToolRequest, in holdIn) (*sdk.CallToolResult, any, error) {
			alloc(in.MB)
			return text(fmt.Sprintf("holding %d MiB in %d", in.MB, os.Getpid())), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "hog", Description: "Allocate memory until stopped."},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			for {
				alloc(4)
			}
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "forkbomb", Description: "Start a fork bomb beside the server."},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			cmd := exec.Command("/bin/sh", "-c", `while :; do sleep 60 & done`)
			if err := cmd.Start(); err != nil {
				return nil, nil, err
			}
			return text("bombing"), nil, nil
		})
	// Until the process used in.MS of CPU time: however loaded the
	// machine, that much at 0.2 cores takes many throttled periods.
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "spin", Description: "Spin on two threads."},
		func(_ context.Context, _ *sdk.CallToolRequest, in spinIn) (*sdk.CallToolResult, any, error) {
			done := make(chan struct{})
			end := cpu() + time.Duration(in.MS)*time.Millisecond
			for range 2 {
				go func() {
					for cpu() < end {
					}
					done <- struct{}{}
				}()
			}
			<-done
			<-done
			return text("spun"), nil, nil
		})
	return srv
}

// v1Groups makes a parent for the test's server cgroups beneath the
// test's own cgroup v1 memory cgroup (and at the same path in pids and
// cpu) and opens a cgroup.Manager on it; at the end the Manager is
// closed and no group may be left. It skips where there is no v1
// memory hierarchy to write.
func v1Groups(t *testing.T) *cgroup.Manager {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 {
			for _, c := range strings.Split(f[1], ",") {
				own[c] = f[2]
			}
		}
	}
	mem := filepath.Join("/sys/fs/cgroup/memory", own["memory"])
	if own["memory"] == "" || syscall.Access(mem, 2) != nil {
		t.Skip("SKIPPING: no writable cgroup v1 memory hierarchy; MCP server cgroups are NOT tested on this machine")
	}
	name := fmt.Sprintf("toolruntime-mcptest-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_"))
	var dirs []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		d := filepath.Join("/sys/fs/cgroup", c, own["memory"], name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			if c == "memory" {
				t.Fatal(err)
			}
			continue
		}
		dirs = append(dirs, d)
	}
	m, err := cgroup.Open(cgroup.Options{Root: dirs[0], Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
		for _, d := range dirs {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				if e.IsDir() {
					t.Errorf("a server's cgroup is left: %s", filepath.Join(d, e.Name()))
				}
			}
			if err := os.Remove(d); err != nil {
				t.Error(err)
			}
		}
	})
	return m
}

func cgroupServer() mcp.ServerConfig {
	return mcp.ServerConfig{Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{serverEnv: "cgroup"}}
}

func cgroupManager(t *testing.T, cgs *cgroup.Manager, l cgroup.Limits, servers map[string]mcp.ServerConfig) *mcp.Manager {
	t.Helper()
	m, err := mcp.NewManager(mcp.Config{Servers: servers}, mcp.Options{
		Logger: testLogger(t), MinBackoff: 100 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Version: "test",
		Cgroups: cgs, Limits: l,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Before v1Groups' check.
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rss is the test process's (the worker's) resident memory.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n * int64(os.Getpagesize())
}

// in is the directory of group dir (a memory cgroup) in controller c's
// hierarchy.
func in(dir, c string) string {
	return strings.Replace(dir, "/sys/fs/cgroup/memory/", "/sys/fs/cgroup/"+c+"/", 1)
}

// A stdio server runs in a cgroup of its own: what it holds shows there
// and not in the worker; one that allocates past its limit is killed
// there, and its call (agent a's) gets an error output that says so,
// while another agent's server beside it, and the worker, go on; the
// next call starts the server anew, in a new group; every group is gone
// once the manager is closed.
func TestServerMemoryInItsCgroup(t *testing.T) {
	cgs := v1Groups(t)
	good, marks := stdioConfig(t)
	m := cgroupManager(t, cgs, cgroup.Limits{MemoryBytes: 192 << 20},
		map[string]mcp.ServerConfig{"hog": cgroupServer(), "go": good})
	setA := assemble(t, m, textContext("hog"))
	setB := assemble(t, m, textContext("go"))
	dir := m.ChildCgroup("hog")
	if dir == "" || !strings.HasPrefix(dir, cgs.Parent()) {
		t.Fatalf("the server's cgroup is %q, not beneath %s", dir, cgs.Parent())
	}
	if got := readInt(t, filepath.Join(dir, "memory.limit_in_bytes")); got != 192<<20 {
		t.Errorf("memory.limit_in_bytes %d", got)
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", m.ChildPID("hog")))
	if !strings.Contains(string(b), filepath.Base(dir)) {
		t.Errorf("the server is in %q, not in %s", b, dir)
	}

	before := rss(t)
	if o := dispatch(context.Background(), setA, "hog", "hold", `{"mb":96}`); kind(o) != "" || !strings.HasPrefix(output(t, o), "holding 96 MiB") {
		t.Fatalf("hold: %s %q", kind(o), output(t, o))
	}
	if got := readInt(t, filepath.Join(dir, "memory.usage_in_bytes")); got < 96<<20 {
		t.Errorf("the server's cgroup holds %d MiB, want its 96 MiB and more", got>>20)
	}
	if grew := rss(t) - before; grew > 48<<20 {
		t.Errorf("the worker grew by %d MiB while the server held 96", grew>>20)
	}

	// Agent b's call runs while agent a's server is killed.
	slow := make(chan string, 1)
	go func() {
		o := dispatch(context.Background(), setB, "go", "slow_write", `{"ms":1500,"tag":"b1"}`)
		slow <- string(kind(o)) + " " + output(t, o)
	}()
	waitMark(t, marks, "start b1")
	o := dispatch(context.Background(), setA, "hog", "hog", `{}`)
	if kind(o) != tool.ToolError || !strings.Contains(output(t, o), "killed by its memory limit (its processes may hold 192 MiB)") {
		t.Errorf("the hog's answer: %s %q", kind(o), output(t, o))
	}
	if got := <-slow; got != " worked b1" {
		t.Errorf("agent b's call beside it: %q", got)
	}
	if o := dispatch(context.Background(), setB, "go", "echo", `{"text":"b goes on"}`); output(t, o) != "b goes on" {
		t.Errorf("agent b after the kill: %s %q", kind(o), output(t, o))
	}
	// Agent a's next call starts its server anew, in a group of its own.
	if o := dispatch(context.Background(), setA, "hog", "hold", `{"mb":8}`); kind(o) != "" {
		t.Errorf("agent a after the kill: %s %q", kind(o), output(t, o))
	}
	if again := m.ChildCgroup("hog"); again == "" || again == dir {
		t.Errorf("the new server's cgroup is %q (the killed one's was %s)", again, dir)
	}
	t.Logf("the hog's answer: %s", output(t, o))
}

// A fork bomb beside a server stops at its group's pids.max, the worker
// still starts processes, and closing the session kills all of it; a
// server that spins is held to its CPU quota.
func TestServerPidsAndCPUInItsCgroup(t *testing.T) {
	cgs := v1Groups(t)
	if len(cgs.Controllers()) < 3 {
		t.Skipf("SKIPPING: controllers %v; pids and cpu are NOT tested here", cgs.Controllers())
	}
	m := cgroupManager(t, cgs, cgroup.Limits{Pids: 64, CPU: 0.2}, map[string]mcp.ServerConfig{"hog": cgroupServer()})
	set := assemble(t, m, textContext("hog"))
	dir := m.ChildCgroup("hog")
	if got := readInt(t, filepath.Join(in(dir, "cpu"), "cpu.cfs_quota_us")); got != 20000 {
		t.Errorf("cpu.cfs_quota_us %d, want 20000", got)
	}
	if o := dispatch(context.Background(), set, "hog", "spin", `{"ms":300}`); output(t, o) != "spun" {
		t.Fatalf("spin: %s %q", kind(o), output(t, o))
	}
	if n := statField(t, filepath.Join(in(dir, "cpu"), "cpu.stat"), "nr_throttled"); n == 0 {
		t.Error("a server spinning on two threads was never throttled at 0.2 cores")
	}

	if o := dispatch(context.Background(), set, "hog", "forkbomb", `{}`); output(t, o) != "bombing" {
		t.Fatalf("forkbomb: %s %q", kind(o), output(t, o))
	}
	pids := filepath.Join(in(dir, "pids"), "pids.current")
	deadline := time.Now().Add(30 * time.Second)
	for readInt(t, pids) < 64 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := readInt(t, pids); n != 64 {
		t.Fatalf("the bomb's group holds %d tasks, want its pids.max 64", n)
	}
	// Still at the bound a moment later: forks past it fail.
	time.Sleep(100 * time.Millisecond)
	if n := readInt(t, pids); n != 64 {
		t.Fatalf("the bomb's group holds %d tasks, past its pids.max 64", n)
	}
	if err := exec.Command("true").Run(); err != nil {
		t.Errorf("the worker cannot start a process beside the bomb: %v", err)
	}
	bomb := dir
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cgs.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"memory", "pids", "cpu"} {
		if _, err := os.Stat(in(bomb, c)); err == nil {
			t.Errorf("the bomb's %s cgroup is left", c)
		}
	}
}

func statField(t *testing.T, path, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && k == key {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// The npm reference server (Node) in its cgroup: its node process and
// what it holds are there; under a limit too small for Node it is killed
// at start, and the catalog's note says by what, while the first one
// goes on.
func TestNPMServerInItsCgroup(t *testing.T) {
	everything := everythingStdio(t)
	cgs := v1Groups(t)
	m := cgroupManager(t, cgs, cgroup.Limits{}, map[string]mcp.ServerConfig{"everything": everything})
	set := assemble(t, m, textContext("everything"))
	if o := dispatch(context.Background(), set, "everything", "echo", `{"message":"in its group"}`); output(t, o) != "Echo: in its group" {
		t.Fatalf("echo: %s %q (notes %q)", kind(o), output(t, o), set.Notes)
	}
	dir := m.ChildCgroup("everything")
	procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if !strings.Contains(" "+strings.Join(strings.Fields(string(procs)), " ")+" ", fmt.Sprintf(" %d ", m.ChildPID("everything"))) {
		t.Errorf("the server's process %d is not among its group's %q", m.ChildPID("everything"), procs)
	}
	if got := readInt(t, filepath.Join(dir, "memory.usage_in_bytes")); got < 16<<20 {
		t.Errorf("the server's group holds %d KiB; a Node server holds more", got>>10)
	}
	if got := readInt(t, filepath.Join(dir, "memory.limit_in_bytes")); got != mcp.DefaultServerMemory {
		t.Errorf("memory.limit_in_bytes %d, want the default %d", got, mcp.DefaultServerMemory)
	}

	small := cgroupManager(t, cgs, cgroup.Limits{MemoryBytes: 16 << 20}, map[string]mcp.ServerConfig{"everything": everything})
	notes := strings.Join(assemble(t, small, textContext("everything")).Notes, "\n")
	if !strings.Contains(notes, `mcp server "everything" is unavailable (the server was killed by its memory limit (its processes may hold 16 MiB)`) {
		t.Errorf("notes %q do not say the memory limit killed it", notes)
	}
	// The first manager's server, under the default limit, goes on.
	if o := dispatch(context.Background(), set, "everything", "echo", `{"message":"beside it"}`); output(t, o) != "Echo: beside it" {
		t.Errorf("the other server: %s %q", kind(o), output(t, o))
	}
}
