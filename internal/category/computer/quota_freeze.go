package computer

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Where a command has no cgroup of its own (a worker that is not root
// and was given none: cgroup v1 is root's), nothing in the kernel paces
// it and a writer at tmpfs speed outruns a worker the host runs late.
// procTree holds it instead, in userland: every process descending from
// the sandbox's outermost process (that is, every process of the
// command's pid namespace, however it was started: setsid, a double
// fork, new process groups, a subreaper, all stay below the namespace's
// init) is stopped with SIGSTOP until the set is stable, and continued
// with SIGCONT. The follower freezes the command for each confirming
// walk (the walk then counts what is, not what a writer keeps adding
// while it walks) and, near a bound, paces it by a duty cycle: the
// command runs a share of each period and is stopped for the rest. A
// worker the host runs late leaves the command stopped longer, not
// running longer, except for the run phase a late timer stretches.
type procTree struct {
	root int
	mu   sync.Mutex
	// held are the processes this tree stopped, by pid, with a pidfd
	// each (a pid reused meanwhile is never signalled).
	held map[int]int
	// frozen: the follower holds the tree (a confirming walk); off: the
	// duty cycle is in its stopped phase.
	frozen, off bool
	// idle: the tree's processes run SCHED_IDLE (set at its first
	// freeze or pace, on every process a freeze finds after): the kernel
	// runs them only when nothing else of the host wants the CPU, the
	// worker that watches them included, so a worker the host runs late
	// is late by less of what they write. Not undone: an unprivileged
	// worker cannot raise them back.
	idle bool
	// the duty cycle's goroutine, while one runs.
	duty     chan struct{}
	dutyDone chan struct{}
	cores    float64
	closed   bool
	// groupNice is the nice the idle processes' session groups get too
	// (0: theirs; see setIdle). A paced command's is pacedNice: its
	// group at nice 0 competed with the worker's as an equal, and the
	// host left the worker unrun for up to 37 ms at a time while eight
	// writers of 1 MiB at a time ran on, the duty cycle's 2 ms
	// on-phases stretched to 10 to 30 (as uid 65534, not -race: 4 of
	// 160 runs past a home of 32 MiB by more than 24 MiB, one by 68; at
	// nice 5, none of 60 by more than 6, nor of 200 at nice 10 by more
	// than 8). A command in a home at or over its bound when it
	// starts, or one whose home's estimate passed the line (within an
	// eighth of a bound), gets lowNice (lower): the CPU only where
	// nothing else wants it, so the follower, woken by its growth,
	// stops it before it goes on. Not every paced command: a group at
	// nice 19 on a busy host runs many times slower (a paced writer
	// beside two busy loops ran into its time limit); at nice 5 it has
	// about a quarter of a core beside each busy group.
	groupNice int
	// fsize is the RLIMIT_FSIZE the follower lowered the tree's
	// processes to (0: none; see follower.capFiles).
	fsize int64
	// retry continues, later, the processes contAll kept stopped for
	// their groups' nice (nil: none waits).
	retry *time.Timer
}

// dutyPeriod is the duty cycle's period: a tenth of a core runs 2 ms of
// every 20.
const dutyPeriod = 20 * time.Millisecond

func newProcTree(root int) *procTree {
	return &procTree{root: root, held: map[int]int{}}
}

// members are the processes below root now, each with its parent.
func (p *procTree) members() map[int]int {
	out := map[int]int{}
	queue := []int{p.root}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(parent) + "/task")
		if err != nil {
			continue
		}
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(parent) + "/task/" + task.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range bytes.Fields(b) {
				pid, err := strconv.Atoi(string(f))
				if err != nil || pid <= 0 {
					continue
				}
				if _, seen := out[pid]; !seen {
					out[pid] = parent
					queue = append(queue, pid)
				}
			}
		}
	}
	return out
}

// statOf is a process's state letter and parent, from /proc/<pid>/stat
// (state 0: gone).
func statOf(pid int) (state byte, ppid int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 2 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(string(f[1]))
	return f[0][0], ppid
}

// stopAll stops every process of the tree, again and again until a look
// finds none it has not stopped and every one stopped (or gone, or in
// the kernel past the deadline: a process in an uninterruptible wait
// stops when it comes out). p.mu is held.
func (p *procTree) stopAll() {
	deadline := time.Now().Add(200 * time.Millisecond)
	var stopped []int
	for round := 0; ; round++ {
		fresh := false
		stopped = stopped[:0]
		for pid, parent := range p.members() {
			if _, ok := p.held[pid]; ok {
				continue
			}
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue // gone
			}
			// The pid is the one listed (not one reused since): its
			// parent is the one it was listed under.
			if _, pp := statOf(pid); pp != parent {
				unix.Close(fd)
				fresh = true
				continue
			}
			_ = unix.PidfdSendSignal(fd, unix.SIGSTOP, nil, 0)
			p.held[pid] = fd
			stopped = append(stopped, pid)
			fresh = true
		}
		// Every process found is signalled before any is set up: the
		// others run on while one's scheduling and limits are set.
		for _, pid := range stopped {
			if p.idle {
				setIdle(pid, p.groupNice)
			}
			p.capPid(pid)
		}
		if !fresh {
			all := true
			for pid := range p.held {
				if st, _ := statOf(pid); st != 0 && st != 'T' && st != 't' && st != 'Z' && st != 'X' {
					all = false
					break
				}
			}
			if all || time.Now().After(deadline) {
				return
			}
		}
		if round > 2 {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// The nices of a command's session group: paced, and near a bound.
const (
	pacedNice = 5
	lowNice   = 19
)

// setIdle makes every thread of pid SCHED_IDLE; its children inherit it.
// Where the kernel groups each session (sched_autogroup), the command's
// session competes with the worker's as a group, and SCHED_IDLE ranks its
// processes only within it: with nice above 0, its group's nice is set to
// it too (see niceGroup). The worker's own group is left alone.
func setIdle(pid int, nice int) {
	if nice > 0 {
		niceGroup(pid, nice)
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return
	}
	for _, task := range tasks {
		if tid, err := strconv.Atoi(task.Name()); err == nil {
			_ = unix.SchedSetAttr(tid, &unix.SchedAttr{Policy: unix.SCHED_IDLE}, 0)
		}
	}
}

// lower gives the tree's session groups lowNice from now on (see
// groupNice): the follower calls it once the command's home nears a
// bound. Without it a command's SCHED_IDLE is no help against a worker
// the host runs late: bubblewrap starts every command in a session of
// its own (--new-session), so with autogroups its processes compete as a
// group of nice 0, as many as the worker's, and SCHED_IDLE only ranks
// them among themselves. A writer then ran on at full speed while the
// follower waited for a core, thousands of entries or tens of MiB past
// its bound on a host with two busy cores beside it.
func (p *procTree) lower() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.groupNice >= lowNice || p.closed {
		return
	}
	p.groupNice = lowNice
	for pid := range p.members() {
		niceGroup(pid, lowNice)
	}
}

// contAll continues every process the tree stopped, but one whose
// session group is not yet at the tree's groupNice: a command whose
// processes each setsid'd into groups of their own at nice 0 would run
// them as the worker's equals again, and without CAP_SYS_ADMIN the
// kernel takes one write of a group's nice a tenth of a second across
// the host, so lowering eight such groups takes most of a second. Eight
// writers of 1 MiB at a time, each in a session of its own, as uid
// 65534 (30 runs each): 8 runs from 14 to 26 MiB past a home of 32
// before, 29 within 4 MiB after (one 28: the groups are at nice 0 from
// their start until the tree is first paced or stopped, and the worker,
// one group among nine, was run late). Such a process stays stopped,
// and is tried again a tenth of a second later (or at the next stop or
// continue), until its group is lowered. With all, every process is
// continued (the command ends). p.mu is held.
func (p *procTree) contAll(all bool) {
	kept := false
	for pid, fd := range p.held {
		if !all && p.groupNice > 0 && !niceGroup(pid, p.groupNice) {
			kept = true
			continue
		}
		_ = unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0)
		unix.Close(fd)
		delete(p.held, pid)
	}
	if kept && p.retry == nil {
		p.retry = time.AfterFunc(groupRetry, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.retry = nil
			p.apply()
		})
	}
}

// groupRetry is how soon a process kept stopped for its group's nice is
// tried again: the kernel's interval between two writes of a user
// without CAP_SYS_ADMIN, and a little more.
const groupRetry = 110 * time.Millisecond

// apply stops or continues the tree as the follower and the duty cycle
// want it. p.mu is held.
func (p *procTree) apply() {
	if p.closed {
		return
	}
	if p.frozen || p.off {
		p.stopAll()
	} else {
		p.contAll(false)
	}
}

// freeze stops the whole tree for the follower (nil: nothing to do).
func (p *procTree) freeze() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
	p.idle = true
	p.apply()
}

// hold stops the tree as freeze does, unless the follower holds it
// already: it says whether it did (thaw lets it go).
func (p *procTree) hold() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen || p.closed {
		return false
	}
	p.frozen = true
	p.idle = true
	p.apply()
	return true
}

// thaw lets the tree run again, unless the duty cycle holds it.
func (p *procTree) thaw() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = false
	p.apply()
}

// pace is the tree's pacer: cores is the share of each period the
// command runs (0: not paced).
func (p *procTree) pace(cores float64) error {
	p.mu.Lock()
	if p.duty != nil {
		close(p.duty)
		done := p.dutyDone
		p.duty = nil
		p.mu.Unlock()
		<-done
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	p.cores = cores
	p.off = false
	if cores > 0 && (!p.idle || p.groupNice < pacedNice) {
		p.idle = true
		p.groupNice = max(p.groupNice, pacedNice)
		for pid := range p.members() {
			setIdle(pid, p.groupNice)
		}
	}
	if cores <= 0 || p.closed {
		p.apply()
		return nil
	}
	stop, done := make(chan struct{}), make(chan struct{})
	p.duty, p.dutyDone = stop, done
	on := max(time.Duration(cores*float64(dutyPeriod)), time.Millisecond)
	period := max(dutyPeriod, time.Duration(float64(on)/cores))
	go func() {
		defer close(done)
		t := time.NewTimer(on)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			p.mu.Lock()
			p.off = !p.off
			p.apply()
			next := on
			if p.off {
				next = period - on
			}
			p.mu.Unlock()
			t.Reset(next)
		}
	}()
	return nil
}

// close ends the duty cycle and continues whatever the tree stopped (a
// command that ends is not left stopped; one killed dies stopped).
func (p *procTree) close() {
	if p == nil {
		return
	}
	_ = p.pace(0)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen, p.off = false, false
	p.contAll(true)
	p.closed = true
	if p.retry != nil {
		p.retry.Stop()
		p.retry = nil
	}
}

// setTree gives w the command's process tree, where the command has no
// cgroup (the run loop may already run: it loads it): it paces the command (instead of a cgroup's CPU bandwidth) and
// is stopped for confirming walks. The first line is an eighth of each
// bound below it.
func (w *follower) setTree(t *procTree) {
	if w == nil {
		return
	}
	w.tree.Store(t)
	if w.tight() {
		// Nothing of the command runs until the follower counted the
		// home and watches it (the run loop lets it go).
		t.mu.Lock()
		t.groupNice = lowNice
		t.mu.Unlock()
		t.freeze()
		w.startHeld.Store(true)
		if w.notify != nil {
			_ = w.notify.SetReadDeadline(time.Now()) // wake the loop
		}
	}
	w.setPacer(t.pace)
}

// overLine says whether the estimate crossed the line below the bounds
// (only with a tree: a cgroup paces instead).
func (w *follower) overLine() bool {
	if w.tree.Load() == nil {
		return false
	}
	q := w.q
	if !w.lineSet {
		w.lineSet = true
		w.line = usage{bytes: q.bytes - q.bytes/8, files: q.files - q.files/8}
		w.raiseLine(&w.start)
	}
	return q.bytes > 0 && w.est.bytes >= w.line.bytes || q.files > 0 && w.est.files >= w.line.files
}

// raiseLine moves the line above u, a walk's count under the bounds:
// halfway to each bound, and at least a 64th of it past u (the bound
// itself, nearer than that).
func (w *follower) raiseLine(u *usage) {
	if !w.lineSet {
		return
	}
	q := w.q
	next := func(line, got, bound int64) int64 {
		if bound <= 0 || got < line {
			return line
		}
		return min(max(got+(bound-got)/2, got+bound/64), bound)
	}
	w.line.bytes = next(w.line.bytes, u.bytes, q.bytes)
	w.line.files = next(w.line.files, u.files, q.files)
}

// xattrGrew takes rel's extended attributes into the estimate: their
// growth since last read, as bytes and as entries (one per xattrInode,
// as a walk counts them).
func (w *follower) xattrGrew(rel string) {
	if w.top == nil {
		return
	}
	b := xattrBytesAt(int(w.top.Fd()), rel)
	old := w.xsizes[rel]
	if b == old {
		return
	}
	inodes := func(n int64) int64 { return (n + xattrInode - 1) / xattrInode }
	w.est.bytes += b - old
	w.est.files += inodes(b) - inodes(old)
	if len(w.xsizes) >= maxTrackedSize {
		clear(w.xsizes)
	}
	w.xsizes[rel] = b
	w.attrib = true
}

// drain reads the events queued now, without waiting, into the estimate
// (which the walk that follows replaces): with the command stopped, none
// is left to be counted again after the walk.
func (w *follower) drain(buf []byte) {
	if w.f == nil {
		return
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		return
	}
	for range 1024 {
		n := 0
		_ = rc.Read(func(fd uintptr) bool {
			n, _ = unix.Read(int(fd), buf)
			return true
		})
		if n <= 0 {
			break
		}
		parseEvents(buf[:n], w.event)
	}
	w.flush()
}

// stopped says whether the tree is held stopped now (by the follower or
// the duty cycle).
func (p *procTree) stopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && (p.frozen || p.off)
}

// niceGroup sets the autogroup of pid's session to nice, unless it is
// the worker's own or at that nice or above already (no autogroups:
// nothing to do). A command may set its own group's nice back (any
// user may, to 0 or above, where /proc is writable to it) or leave it
// by setsid: each stop of the tree (a freeze, the duty cycle's
// off-phase) sets it again, and contAll holds a process until it is.
// It says false only when the group is below nice and could not be set
// (EAGAIN: see contAll).
func niceGroup(pid int, nice int) bool {
	path := "/proc/" + strconv.Itoa(pid) + "/autogroup"
	b, err := os.ReadFile(path)
	if err != nil {
		return true // gone, or no autogroups
	}
	name, now, ok := bytes.Cut(bytes.TrimSpace(b), []byte(" nice "))
	if n, err := strconv.Atoi(string(now)); !ok || err != nil || n >= nice {
		return true
	}
	if own, err := os.ReadFile("/proc/self/autogroup"); err != nil || bytes.HasPrefix(own, append(name, ' ')) {
		return true
	}
	return os.WriteFile(path, []byte(strconv.Itoa(nice)), 0) == nil
}

// holdBurst keeps the command stopped after a read that held it (a
// burst of grown entries) when as many entries again would take the
// estimate past the line: its group goes to nice 19 and a walk confirms
// at once, as at the line (with a tree only). The events count each
// entry once, so between walks a writer's entries reach the line only as
// it truly does; a host that leaves the follower unrun for tens of
// milliseconds lets a writer make a read's worth (some 2,000 entries)
// between two of its looks, more than the eighth of a bound the line
// leaves: a FIFO and socket storm as uid 65534 beside two busy loops
// went from 3,485 entries to 5,533 in one read, and ended 1,740 past.
func (w *follower) holdBurst(grown int64) {
	t := w.tree.Load()
	if t == nil || grown <= 0 || w.q.files <= 0 || w.gated() || w.pressed {
		return
	}
	w.overLine() // sets the line
	if w.est.files+grown < w.line.files {
		return
	}
	t.lower()
	w.pressed, w.ahead, w.walkNow = true, true, true
}
