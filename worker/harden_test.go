package worker

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The credential the tests give the worker through its environment; the
// embedded server has no authorization, so it connects with any token.
const testToken = "tok-worker-5e1d9a7c"

// workerProc is a worker process started by a test, with its log.
type workerProc struct {
	cmd  *exec.Cmd
	logs chan string
}

// startWorker runs prefix + the worker on an embedded server with a
// random port, WORKER_TOKEN in its environment, and waits until it logs
// that it is connected.
func startWorkerAs(t *testing.T, bin string, prefix []string, cred *syscall.Credential) *workerProc {
	t.Helper()
	// Beside the binary: t.TempDir's parents are closed to other users.
	data, err := os.MkdirTemp(filepath.Dir(bin), "data")
	if err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		if err := os.Chown(data, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	args := append(prefix, bin, "--listen", "127.0.0.1:-1", "--monitor-port", "0", "--data-dir", data,
		"--todo=false", "--brain=false", "--schedules=false", "--background-jobs=false")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "WORKER_TOKEN=" + testToken, "WORKER_LOG_LEVEL=info", "HOME=" + data}
	cmd.Dir = filepath.Dir(bin)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &workerProc{cmd: cmd, logs: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.logs <- sc.Text()
		}
		close(p.logs)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	p.waitLog(t, "msg=connected")
	return p
}

// waitLog reads the log until a line holds want.
func (p *workerProc) waitLog(t *testing.T, want string) {
	t.Helper()
	var seen []string
	deadline := time.After(time.Minute) // a hang guard, not a timing assertion
	for {
		select {
		case line, ok := <-p.logs:
			if !ok {
				t.Fatalf("the worker ended without logging %q:\n%s", want, strings.Join(seen, "\n"))
			}
			if strings.Contains(line, want) {
				return
			}
			seen = append(seen, line)
		case <-deadline:
			t.Fatalf("no %q in the worker's log:\n%s", want, strings.Join(seen, "\n"))
		}
	}
}

// stop sends SIGTERM to pid and returns the worker's exit code.
func (p *workerProc) stop(t *testing.T, pid int) int {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range p.logs { // keep the pipe flowing until the end
		}
	}()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the worker did not stop on SIGTERM")
	}
	return p.cmd.ProcessState.ExitCode()
}

// environOf reads /proc/<pid>/environ as cred (nil: as this process).
func environOf(pid int, cred *syscall.Credential) ([]byte, error) {
	cmd := exec.Command("/bin/cat", fmt.Sprintf("/proc/%d/environ", pid))
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, errOut.String())
	}
	return out.Bytes(), nil
}

// TestWorkerHidesItsCredentials runs the real worker, as an unprivileged
// user when the test is root, with its NATS token in its environment. A
// process of the same user cannot read /proc/<pid>/environ (the worker is
// not dumpable), and root, who can, finds the token blanked there.
func TestWorkerHidesItsCredentials(t *testing.T) {
	t.Parallel()
	bin := workerBinary(t)
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	w := startWorkerAs(t, bin, nil, cred)
	pid := w.cmd.Process.Pid
	if out, err := environOf(pid, cred); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("a process of the worker's user read its environment: %q, %v", out, err)
	}
	if os.Geteuid() == 0 {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(env, []byte(testToken)) || !bytes.Contains(env, []byte("WORKER_LOG_LEVEL=info")) {
			t.Errorf("the worker's environment block: %q", env)
		}
	}
	if code := w.stop(t, pid); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

// childOf is the first child of pid (which of its threads forked it does
// not matter: a Go program forks from any).
func childOf(t *testing.T, pid int) int {
	t.Helper()
	var child int
	deadline := time.Now().Add(30 * time.Second)
	for child == 0 {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
		for _, task := range tasks {
			b, _ := os.ReadFile(task)
			if f := strings.Fields(string(b)); len(f) > 0 && child == 0 {
				child, _ = strconv.Atoi(f[0])
			}
		}
		if child == 0 && time.Now().After(deadline) {
			t.Fatalf("process %d has no child", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return child
}

// TestWorkerAsPID1 runs the real worker as PID 1 of a new pid namespace,
// as a container without an init would: it becomes its own init, the
// worker runs as its child and connects, both hide the token, a SIGTERM
// sent to PID 1 from outside reaches the worker, which stops gracefully,
// and the init exits with its status.
func TestWorkerAsPID1(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare (util-linux) is not installed")
	}
	prefix := []string{unshare, "--pid", "--fork", "--mount-proc"}
	if os.Geteuid() != 0 {
		prefix = []string{unshare, "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"}
	}
	if out, err := exec.Command(prefix[0], append(prefix[1:], "/bin/true")...).CombinedOutput(); err != nil {
		t.Skipf("cannot make a pid namespace here: %v: %s", err, out)
	}
	w := startWorkerAs(t, workerBinary(t), prefix, nil)
	init := childOf(t, w.cmd.Process.Pid)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", init))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "NSpid:\t"+strconv.Itoa(init)+"\t1\n") {
		t.Fatalf("process %d is not PID 1 of its namespace:\n%s", init, status)
	}
	worker := childOf(t, init)
	if os.Geteuid() == 0 {
		for _, pid := range []int{init, worker} {
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(env, []byte(testToken)) {
				t.Errorf("process %d keeps the token in its environment block", pid)
			}
		}
	}
	if code := w.stop(t, init); code != 0 {
		t.Errorf("exit %d after SIGTERM to the init", code)
	}
}
