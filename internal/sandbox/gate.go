package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
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
