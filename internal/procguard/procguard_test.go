package procguard_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/procguard"
)

// helperEnv makes the test binary a helper process instead of running the
// tests: the processes the tests watch from outside.
const helperEnv = "PROCGUARD_HELPER"

const (
	secretName  = "TEST_NATS_TOKEN"
	secretValue = "tok-3f9a1c7e5b2d"
	plainName   = "TEST_PLAIN"
	plainValue  = "plain-visible-value"
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "harden", "plain":
		os.Exit(hardenHelper(os.Getenv(helperEnv) == "harden"))
	case "init":
		procguard.Init(secretName)
		os.Exit(initChild())
	case "noinit":
		os.Exit(zombieHelper())
	case "fds", "fds-proc", "fds-none":
		os.Exit(fdsHelper(os.Getenv(helperEnv)))
	}
	os.Exit(99)
}

// hardenHelper hardens itself (or not), reports what it and a child see
// of the secret, then waits for its stdin to close.
func hardenHelper(harden bool) int {
	if harden {
		if err := procguard.Harden(secretName); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	out, _ := exec.Command("/bin/sh", "-c", `echo "child=$`+secretName+`"`).Output()
	fmt.Printf("self=%s\n%sready\n", os.Getenv(secretName), out)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// helperBinary is a copy of the test binary every user may run (the one go
// test built sits in a directory only its owner may enter).
func helperBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "procguard")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helper")
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// nobody is the unprivileged user the processes of a root test run as.
var nobody = &syscall.Credential{Uid: 65534, Gid: 65534}

// TestHardenHidesEnvironment: after Harden, another process of the same
// non-root user cannot read /proc/<pid>/environ, the secret is gone from
// the environment a child inherits, and even root, who can read the file,
// no longer finds its value there. Without Harden (the control) the same
// reader finds the secret.
func TestHardenHidesEnvironment(t *testing.T) {
	bin := helperBinary(t)
	for _, mode := range []string{"plain", "harden"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(bin)
			cmd.Dir = filepath.Dir(bin)
			cmd.Env = []string{helperEnv + "=" + mode, secretName + "=" + secretValue, plainName + "=" + plainValue, "PATH=/usr/bin:/bin"}
			asRoot := os.Geteuid() == 0
			if asRoot {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
			}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
			seen := map[string]string{}
			sc := bufio.NewScanner(stdout)
			for sc.Scan() && sc.Text() != "ready" {
				k, v, _ := strings.Cut(sc.Text(), "=")
				seen[k] = v
			}
			if seen["error"] != "" {
				t.Fatalf("Harden: %s", seen["error"])
			}

			// Another process of the helper's (non-root) user reads its
			// environment.
			environ := fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid)
			reader := exec.Command("/bin/cat", environ)
			if asRoot {
				reader.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
			}
			got, readErr := reader.CombinedOutput()
			hardened := mode == "harden"
			switch {
			case hardened && readErr == nil:
				t.Errorf("a process of the same user read %s after Harden: %q", environ, got)
			case hardened && !bytes.Contains(got, []byte("Permission denied")):
				t.Errorf("reading %s failed, but not for want of permission: %s", environ, got)
			case !hardened && !bytes.Contains(got, []byte(secretValue)):
				t.Errorf("control: a process of the same user could not read the secret in %s (%v: %q); the test proves nothing", environ, readErr, got)
			}

			wantSeen := secretValue
			if hardened {
				wantSeen = ""
			}
			if seen["self"] != wantSeen || seen["child"] != wantSeen {
				t.Errorf("%s is %q in the process and %q in its child, want %q", secretName, seen["self"], seen["child"], wantSeen)
			}

			if !asRoot {
				return
			}
			// Root (CAP_SYS_PTRACE) still reads the file: the value must
			// be gone from it, the other variables intact.
			b, err := os.ReadFile(environ)
			if err != nil {
				t.Fatal(err)
			}
			if hardened == bytes.Contains(b, []byte(secretValue)) {
				t.Errorf("after Harden=%v the environment block holds %q", hardened, b)
			}
			if !bytes.Contains(b, []byte(plainName+"="+plainValue)) {
				t.Errorf("the other variables were damaged: %q", b)
			}
		})
	}
}

// TestHardenWithoutVariables: hardening forgets nothing when given no
// names, and a name that is not set is no error.
func TestHardenWithoutVariables(t *testing.T) {
	cmd := exec.Command(helperBinary(t))
	cmd.Env = []string{helperEnv + "=harden", "PATH=/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("ready")) {
		t.Fatalf("%v: %s", err, out)
	}
}

// orphans is how many orphans the helpers leave behind.
const orphans = 40

// spawnOrphans starts processes whose parent is gone before they end, so
// that they become children of PID 1, and returns their pids.
func spawnOrphans() ([]int, error) {
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do (sleep 0.05 </dev/null >/dev/null 2>&1 & echo $!); i=$((i+1)); done`, orphans)
	out, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// state is the state letter of process pid ("" when it does not exist).
func state(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}

// zombies lists the zombie processes /proc shows.
func zombies() []int {
	entries, _ := os.ReadDir("/proc")
	var z []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && state(pid) == "Z" {
			z = append(z, pid)
		}
	}
	return z
}

// until polls cond for at most 10 s.
func until(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// initChild is the program under the init: it checks its parent, that a
// signal sent to PID 1 reaches it, and that its orphans are reaped. It
// exits with 7 when all holds, so the test also sees the status passed on.
func initChild() int {
	if os.Getpid() == 1 || os.Getppid() != 1 {
		fmt.Printf("pid %d, parent %d: not the init's child\n", os.Getpid(), os.Getppid())
		return 20
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	_ = syscall.Kill(1, syscall.SIGUSR1)
	select {
	case <-usr1:
	case <-time.After(10 * time.Second):
		fmt.Println("SIGUSR1 sent to PID 1 never arrived")
		return 21
	}
	pids, err := spawnOrphans()
	if err != nil || len(pids) != orphans {
		fmt.Println("spawning orphans:", err, pids)
		return 22
	}
	if !until(func() bool {
		for _, pid := range pids {
			if state(pid) != "" {
				return false
			}
		}
		return len(zombies()) == 0
	}) {
		fmt.Println("zombies remain:", zombies())
		return 23
	}
	fmt.Printf("reaped %d orphans\n", len(pids))
	return 7
}

// zombieHelper is the control: a PID 1 without the init leaves its
// orphans as zombies.
func zombieHelper() int {
	pids, err := spawnOrphans()
	if err != nil {
		fmt.Println("spawning orphans:", err)
		return 1
	}
	if !until(func() bool {
		for _, pid := range pids {
			if state(pid) == "Z" {
				return true
			}
		}
		return false
	}) {
		fmt.Println("no orphan became a zombie")
		return 1
	}
	fmt.Println("zombie")
	return 0
}

// asPID1 runs the test binary as PID 1 of a new pid namespace (with a
// /proc of its own), as a container without an init would.
func asPID1(t *testing.T, mode string) (string, int) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare (util-linux) is not installed")
	}
	args := []string{"--pid", "--fork", "--mount-proc"}
	if os.Geteuid() != 0 {
		args = append([]string{"--user", "--map-root-user"}, args...)
	}
	if out, err := exec.Command(unshare, append(args, "/bin/true")...).CombinedOutput(); err != nil {
		t.Skipf("cannot make a pid namespace here: %v: %s", err, out)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(unshare, append(args, exe)...)
	cmd.Env = []string{helperEnv + "=" + mode, "PATH=/usr/bin:/bin", secretName + "=" + secretValue}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// TestInitReapsOrphans runs the init as PID 1 of a pid namespace: the
// program runs as its child, gets the signals PID 1 gets, and every
// orphan is reaped; the init exits with the program's status. The control
// shows that without the init the same orphans stay zombies.
func TestInitReapsOrphans(t *testing.T) {
	t.Run("control", func(t *testing.T) {
		out, code := asPID1(t, "noinit")
		if code != 0 || !strings.Contains(out, "zombie") {
			t.Fatalf("without the init no zombie showed (exit %d): %s", code, out)
		}
	})
	t.Run("init", func(t *testing.T) {
		out, code := asPID1(t, "init")
		if code != 7 {
			t.Fatalf("exit %d, want the child's 7: %s", code, out)
		}
		if want := fmt.Sprintf("reaped %d orphans", orphans); !strings.Contains(out, want) {
			t.Fatalf("output %q lacks %q", out, want)
		}
	})
}

// fdsHelper marks its descriptors close-on-exec (one way or the other,
// or not at all) and runs a shell that lists its descriptors and reads
// through the one its parent left open, as a sandboxed command would.
func fdsHelper(mode string) int {
	var err error
	switch mode {
	case "fds":
		err = procguard.CloseOnExec()
	case "fds-proc":
		err = procguard.CloseOnExecProc()
	}
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	// The helper's own file, opened after: still its own to use.
	own, err := os.Open("/proc/self/stat")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer own.Close()
	out, _ := exec.Command("/bin/sh", "-c", `ls /proc/self/fd | tr '\n' ' '; echo; cat /proc/self/fd/3 2>&1; echo`).CombinedOutput()
	fmt.Print(string(out))
	// The descriptor stays usable by the process itself.
	b := make([]byte, 64)
	n, _ := os.NewFile(3, "inherited").ReadAt(b, 0)
	fmt.Printf("self reads %q\n", b[:n])
	return 0
}

// TestCloseOnExec starts a process the way a careless wrapper would, with
// a secret file open on descriptor 3 and no close-on-exec, and checks
// that once it marked its descriptors, its child lists only 0, 1, 2 (and
// the descriptor ls itself opens) and cannot read the secret through
// /proc/self/fd/3, while the process still can.
func TestCloseOnExec(t *testing.T) {
	const secret = "secret-of-another-agent-7c1d"
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"fds", "fds-proc", "fds-none"} {
		t.Run(mode, func(t *testing.T) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), helperEnv+"="+mode)
			cmd.ExtraFiles = []*os.File{f} // fd 3 in the helper, inheritable
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			lines := strings.Split(string(out), "\n")
			if len(lines) < 3 {
				t.Fatalf("helper said %q", out)
			}
			fds := strings.Fields(lines[0])
			if !strings.Contains(string(out), `self reads "`+secret+`"`) {
				t.Errorf("the process itself lost its descriptor: %q", out)
			}
			childRead := strings.Contains(strings.Join(lines[1:len(lines)-2], "\n"), secret)
			if mode == "fds-none" {
				// The rig's own check: without the marking, the child does
				// inherit the descriptor.
				if !childRead || !slices.Contains(fds, "3") {
					t.Fatalf("without CloseOnExec the child should inherit fd 3: %q", out)
				}
				return
			}
			if childRead {
				t.Errorf("the child read the secret through /proc/self/fd/3: %q", out)
			}
			// ls lists 0, 1, 2 and the directory it reads (3).
			if len(fds) > 4 {
				t.Errorf("the child has descriptors %v, want 0 1 2 and ls's own", fds)
			}
		})
	}
}
