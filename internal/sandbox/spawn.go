package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// spawner starts every command of a Sandbox from one OS thread of the
// worker. The thread lives as long as the Sandbox: a
// command's parent-death signal (SysProcAttr.Pdeathsig) is tied to the
// thread that forked it, so it must not end while a command runs.
//
// On cgroup v1 the thread also puts each command in its groups: it moves
// itself (its tid, to each group's tasks file) into them for the fork,
// so that bwrap is born there, and back to the thread's own groups after
// (the worker's), instead of a shell that joins them before it execs
// bwrap. The first time it tries it with a command's groups; where it
// cannot, commands are joined by the shell.
// Should a move back fail, the thread is left parked where it is (a
// command's parent-death signal needs it alive) and a new one takes its
// place.
type spawner struct {
	reqs    chan spawnReq
	tainted atomic.Bool // set by a start whose thread could not move back

	mu    sync.Mutex
	v1    int      // 0: not tried yet; 1: the thread joins v1 groups; -1: it cannot
	homes []string // with v1 1: the tasks files of the thread's own groups, in the order of a group's Procs
}

type spawnReq struct {
	start func() error
	done  chan error
}

func newSpawner() *spawner {
	sp := &spawner{reqs: make(chan spawnReq)}
	sp.thread()
	return sp
}

// thread starts a goroutine on a thread of its own that serves reqs.
func (sp *spawner) thread() {
	ready := make(chan struct{})
	go func() {
		// Never unlocked: the goroutine's end ends the thread, whose
		// cgroups (v1) no other goroutine may inherit.
		runtime.LockOSThread()
		close(ready)
		for r := range sp.reqs {
			err := r.start()
			if sp.tainted.Swap(false) {
				sp.thread()
				r.done <- err
				select {} // parked: see spawner
			}
			r.done <- err
		}
	}()
	<-ready
}

// joinsV1 reports whether the thread can join the v1 groups whose
// cgroup.procs files are procs; the first time it tries: it moves into
// them, finds its own groups from where /proc/thread-self/cgroup puts it
// then and before, and moves back.
func (sp *spawner) joinsV1(procs []string) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.v1 == 0 {
		sp.v1 = -1
		var homes []string
		err := sp.run(func() error {
			before, err := os.ReadFile("/proc/thread-self/cgroup")
			if err != nil {
				return err
			}
			if err := moveThread(tasks(procs)); err != nil {
				return err
			}
			after, err := os.ReadFile("/proc/thread-self/cgroup")
			if err == nil {
				homes, err = ownGroups(procs, string(before), string(after))
			}
			if err == nil {
				err = moveThread(homes)
			}
			if err != nil {
				// Stuck in the groups: the thread is replaced.
				sp.tainted.Store(true)
			}
			return err
		})
		if err == nil {
			sp.v1, sp.homes = 1, homes
		}
	}
	return sp.v1 == 1
}

// ownGroups are the tasks files of the groups the thread was in (before)
// on the hierarchies of procs, the thread being in procs' groups (after):
// a group's directory ends with its path in after, the rest is its
// hierarchy's mount.
func ownGroups(procs []string, before, after string) ([]string, error) {
	paths := func(s string) map[string]string {
		m := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			if f := strings.SplitN(l, ":", 3); len(f) == 3 {
				m[f[0]] = f[2]
			}
		}
		return m
	}
	was, is := paths(before), paths(after)
	homes := make([]string, len(procs))
	for i, p := range procs {
		d := filepath.Dir(p)
		best := ""
		for id, path := range is {
			if path != "/" && strings.HasSuffix(d, path) && len(path) > len(is[best]) && was[id] != "" {
				best = id
			}
		}
		if best == "" {
			return nil, fmt.Errorf("sandbox: %s is in none of the thread's hierarchies", d)
		}
		homes[i] = filepath.Join(strings.TrimSuffix(d, is[best]), was[best], "tasks")
	}
	return homes, nil
}

// startIn returns a start, run on the thread, that forks with start in
// the v1 groups of procs (joinsV1 said it can).
func (sp *spawner) startIn(procs []string, start func() error) func() error {
	return func() error {
		if err := moveThread(tasks(procs)); err != nil {
			if moveThread(sp.homes) != nil {
				sp.tainted.Store(true)
			}
			return fmt.Errorf("sandbox: joining the command's cgroup: %w", err)
		}
		err := start()
		if moveThread(sp.homes) != nil {
			sp.tainted.Store(true)
		}
		return err
	}
}

// tasks are the tasks files of the groups of procs.
func tasks(procs []string) []string {
	ts := make([]string, len(procs))
	for i, p := range procs {
		ts[i] = filepath.Join(filepath.Dir(p), "tasks")
	}
	return ts
}

// moveThread moves the calling thread to each tasks file's group.
func moveThread(files []string) error {
	tid := strconv.Itoa(unix.Gettid())
	for _, f := range files {
		fh, err := os.OpenFile(f, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = fh.WriteString(tid)
		if err = errors.Join(err, fh.Close()); err != nil {
			return fmt.Errorf("moving to %s: %w", f, err)
		}
	}
	return nil
}

// run calls start on the spawner's thread.
func (sp *spawner) run(start func() error) error {
	done := make(chan error, 1)
	sp.reqs <- spawnReq{start: start, done: done}
	return <-done
}

func (sp *spawner) close() { close(sp.reqs) }

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
