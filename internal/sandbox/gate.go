package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// gate is bwrap's --info-fd and --block-fd: bwrap writes the host pid of
// the sandbox's pid 1 to info and has pid 1 wait, its namespaces and
// mounts made, for a byte on block before it starts the command. The
// worker sets the command's rlimits (prlimit(2)) and niceness
// (setpriority(2)) on pid 1 meanwhile, which every process of the
// sandbox inherits, instead of prlimit(1) and nice(1) processes in the
// chain. bwrap's own work, before, runs at the worker's niceness: at
// Nice, a loaded host made the start itself wait (tens of ms).
type gate struct {
	infoR, infoW   *os.File
	blockR, blockW *os.File
}

func newGate() (*gate, error) {
	ir, iw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	br, bw, err := os.Pipe()
	if err != nil {
		ir.Close()
		iw.Close()
		return nil, err
	}
	return &gate{infoR: ir, infoW: iw, blockR: br, blockW: bw}, nil
}

// started closes the ends the child holds.
func (g *gate) started() {
	g.infoW.Close()
	g.blockR.Close()
}

// closeInfo closes the ends but blockW: a pid 1 still waiting on block
// would read its closing as a go, so Run.End closes it, after Wait.
func (g *gate) closeInfo() {
	for _, f := range []*os.File{g.infoR, g.infoW, g.blockR} {
		f.Close()
	}
}

// pid1 reads the sandbox's pid 1 from bwrap's info, waiting at most until
// deadline.
func (g *gate) pid1(deadline time.Time) (int, error) {
	_ = g.infoR.SetReadDeadline(deadline)
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(g.infoR).Decode(&info); err != nil {
		return 0, fmt.Errorf("sandbox: reading bwrap's info: %w", err)
	}
	if info.ChildPid <= 1 {
		return 0, fmt.Errorf("sandbox: bwrap's info has no child pid (%d)", info.ChildPid)
	}
	return info.ChildPid, nil
}

// release lets pid 1 start the command.
func (g *gate) release() error {
	_, err := g.blockW.Write([]byte{1})
	return err
}

// setLimits sets l's rlimits on pid; nproc also RLIMIT_NPROC (not when
// the command makes its own user namespace later: see wrapper).
func setLimits(pid int, l Limits, nproc bool) error {
	set := []struct {
		res      int
		cur, max uint64
	}{
		{unix.RLIMIT_AS, uint64(l.MemoryBytes), uint64(l.MemoryBytes)},
		{unix.RLIMIT_CPU, uint64(l.CPUSeconds), uint64(l.CPUSeconds) + 1},
		{unix.RLIMIT_FSIZE, uint64(l.FileBytes), uint64(l.FileBytes)},
		{unix.RLIMIT_NOFILE, uint64(l.OpenFiles), uint64(l.OpenFiles)},
		{unix.RLIMIT_CORE, 0, 0},
	}
	if nproc {
		set = append(set, struct {
			res      int
			cur, max uint64
		}{unix.RLIMIT_NPROC, uint64(l.Processes), uint64(l.Processes)})
	}
	for _, s := range set {
		if err := unix.Prlimit(pid, s.res, &unix.Rlimit{Cur: s.cur, Max: s.max}, nil); err != nil {
			return fmt.Errorf("sandbox: setting the command's limit %d: %w", s.res, err)
		}
	}
	return nil
}

// readyPair is the wrapper's fd 7, where it says it is ready: a unix
// socket pair rather than a pipe, so that the worker hears from the
// kernel which process wrote (SO_PASSCRED: the pid as the worker's pid
// namespace numbers it) and can read that process's limits.
func readyPair() (*net.UnixConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	w := os.NewFile(uintptr(fds[1]), "ready-w")
	r := os.NewFile(uintptr(fds[0]), "ready")
	defer r.Close() // FileConn dups it
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	c, err := net.FileConn(r)
	if err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	return c.(*net.UnixConn), w, nil
}

// readReady reads the wrapper's ready byte from r, and the pid of the
// process that wrote it (0: not known).
func readReady(r *net.UnixConn) (ready bool, pid int) {
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	n, oobn, _, _, _ := r.ReadMsgUnix(b[:], oob)
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if cred, err := unix.ParseUnixCredentials(&m); err == nil {
				pid = int(cred.Pid)
			}
		}
	}
	return n == 1, pid
}

// checkProcesses sees that the sandbox's wrapper, process pid, runs with
// RLIMIT_NPROC n, soft and hard, as it set it (see wrapper): read from
// its /proc limits by the worker, in one system call where the wrapper's
// shell would take one per byte.
func checkProcesses(pid, n int) error {
	if pid <= 1 {
		return errors.New("sandbox: the command's shell did not say who it is")
	}
	limits, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
	if err != nil {
		return fmt.Errorf("sandbox: reading the command's limits: %w", err)
	}
	want := strconv.Itoa(n)
	for line := range strings.Lines(string(limits)) {
		if rest, ok := strings.CutPrefix(line, "Max processes"); ok {
			if v := strings.Fields(rest); len(v) >= 2 && v[0] == want && v[1] == want {
				return nil
			}
			return fmt.Errorf("sandbox: cannot set the process limit (%s)", strings.Join(strings.Fields(rest), " "))
		}
	}
	return errors.New("sandbox: cannot set the process limit (not in /proc limits)")
}
