package worker

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWorkerAsNobodyInADelegatedCgroup runs the real worker as uid 65534
// in a 1 GiB cgroup v1 memory cgroup given to that user (as the
// deployment runs it; cgroup v2 cannot be tried on this machine): it
// finds its own cgroup writable, and its sandbox check runs a command in
// a cgroup of its own beneath it, which it then removes.
func TestWorkerAsNobodyInADelegatedCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: making a cgroup for uid 65534 needs root")
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var own string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[1] == "memory" {
			own = f[2]
		}
	}
	mem := filepath.Join("/sys/fs/cgroup/memory", own)
	if own == "" || syscall.Access(mem, 2) != nil {
		t.Skip("SKIPPING: no writable cgroup v1 memory hierarchy")
	}
	bin := workerBinary(t)
	cg := filepath.Join(mem, fmt.Sprintf("toolruntime-worker-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(cg); err != nil {
			t.Errorf("the worker's cgroup: %v (a command's cgroup left in it?)", err)
		}
	})
	if err := os.WriteFile(filepath.Join(cg, "memory.limit_in_bytes"), []byte("1073741824"), 0); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"", "cgroup.procs", "tasks"} {
		if err := os.Chown(filepath.Join(cg, f), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	homes, err := os.MkdirTemp(filepath.Dir(bin), "homes")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.MkdirTemp(filepath.Dir(bin), "data")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{homes, data} {
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	mcpConfig := filepath.Join(data, "mcp.json")
	if err := os.WriteFile(mcpConfig, []byte(`{"servers":{"files":{"command":"true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The worker's first process joins the cgroup, then execs the worker.
	cmd := exec.Command("/bin/sh", "-c", `echo $$ >"$0/cgroup.procs" && exec "$@"`, cg,
		bin, "--listen", "127.0.0.1:-1", "--monitor-port", "0", "--data-dir", data, "--computer-root", homes,
		"--todo=false", "--brain=false", "--schedules=false", "--background-jobs=false", "--mcp-config", mcpConfig, "--mcp-memory", "100000000")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "WORKER_TOKEN=" + testToken, "WORKER_LOG_LEVEL=info", "HOME=" + data}
	cmd.Dir = filepath.Dir(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProc{cmd: cmd, logs: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			w.logs <- sc.Text()
		}
		close(w.logs)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// "parent=<cg>": the commands' cgroups are made beneath the worker's.
	w.waitLog(t, `msg="each command runs in a cgroup of its own" cgroup_version=1 controllers=[memory] parent=`+cg)
	// MCP stdio servers get theirs beneath it too.
	w.waitLog(t, `msg="each MCP stdio server runs in a cgroup of its own" mcp_memory=100000000 mcp_pids=256 mcp_cpu=1 parent=`+cg)
	w.waitLog(t, "msg=connected")
	pid := w.cmd.Process.Pid
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); !strings.Contains(string(b), strings.TrimPrefix(cg, "/sys/fs/cgroup/memory")) {
		t.Fatalf("the worker is in %s", b)
	}
	if code := w.stop(t, pid); code != 0 {
		t.Errorf("exit %d", code)
	}
}
