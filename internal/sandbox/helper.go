package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbull/toolruntime/internal/cgroup"
)

// A helper is a home's sandbox that runs its commands one after another:
// bwrap makes it once (namespaces, mounts, limits, the home's cgroup),
// and its first shell, the helper, forks each command inside it. A
// command still gets a cgroup of its own, joined before it starts (the
// worker moves the forked shell into it while it waits on a pipe), a
// fresh /tmp and /dev/shm (the helper empties them after it, and ends
// itself if it cannot), no System V IPC object of an earlier command
// (the helper ends itself if one is left), no process of an earlier
// command (the helper kills every process of the sandbox but itself and
// bwrap's init after each command, and the worker kills everything in
// the command's cgroup and checks that the home's cgroup holds nothing
// but bwrap, its init and the helper), and no descriptor but its output.
//
// What the commands of one home share that separate sandboxes did not:
// the sandbox's namespaces (the loopback interface and its sockets'
// TIME_WAIT state, the hostname) and the helper, a process of the same
// user in the same pid namespace, which a command can signal or trace.
// A command that kills the helper ends the sandbox (the next command
// gets a new one); one that takes control of it can change what later
// commands of the same home find (their /tmp, their reported status, the
// processes the helper leaves), never another home's, nor anything
// outside the sandbox: the worker itself kills every process of each
// command's cgroup when the command ends, and ends the helper's sandbox
// when the home's cgroup holds any process beyond bwrap, its init and
// the helper.
//
// Only with cgroups (Config.Cgroups) and without the network bridge:
// without a cgroup per command the helper alone would stand for the
// kill of a command's processes, and the bridge (socat) is a process
// the helper's kill would end.
type helper struct {
	key   string
	p     *spare        // the sandbox, its wrapper the helper (cmdW: its fd 6)
	ctl   *net.UnixConn // the helper's fd 7: "r" (ready), "d status left|-" (a command ended)
	ev    chan event    // from ctl; closed when the helper ends
	ioDir string        // bound at ioMount: the commands' output FIFOs
	pid   int           // the helper's pid (the worker's namespace)
	pids  []int         // bwrap, its init and the helper: all the home's cgroup may hold
	seq   int
	runs  int
	busy  bool
	dead  bool
	timer *time.Timer
	next  *next // the next command's cgroup and FIFO, being made or made
	// reading: read runs (and will close ev)
	reading bool
}

// event is a line the helper (or a command's shell) wrote on fd 7, and
// the pid of its writer.
type event struct {
	line string
	pid  int
}

// ioMount is where a helper's sandbox sees its output FIFOs.
const ioMount = "/run/toolruntime/io"

// errHelperGone: a helper ended between two commands (it could not
// tidy up after the last, see helperScript); the command was not sent.
var errHelperGone = errors.New("sandbox: the home's helper ended")

// helperRuns ends a helper after this many commands, so that its own
// CPU time stays far from RLIMIT_CPU (each command costs it well under
// a millisecond).
const helperRuns = 10000

// helperScript is the helper: the sandbox's first shell when it serves
// its home's commands one after another. It enters the home, raises its
// oom_score_adj and sets RLIMIT_NPROC as wrapper does, notes what /tmp
// and /dev/shm hold (the directories bwrap made there) and finds
// ulimit's unit for the file size (512 bytes in dash, 1024 in bash) once,
// from /proc/self/limits in a subshell (dash's read takes a byte per
// system call: a thousand for each command if each read it). Then it
// says "r" on fd 7 and waits for "f" on fd 6: the worker has moved it
// into the next command's cgroup (see prep). It forks the command's
// shell there, before the command comes, so that a command costs the
// start of its shell only. That shell reads its command from fd 6: a
// line "fz n id" (fz: its RLIMIT_FSIZE in bytes, "-": pid 1's; n: the
// lines of the command; id: its output FIFO in $2) and n lines; it
// closes fds 6 and 7, sends its output to the FIFO, sets its file size
// limit, exports the locale ($8 on) and becomes $1 -c command. When it
// ends the helper kills every process of the sandbox but itself and
// init, says "d status left|-" on fd 7 and waits for "k" on fd 6 (the
// worker has moved it back into the home's cgroup); then it removes
// what the command left in /tmp and /dev/shm and, if that worked and no
// System V IPC object is left, says "r" again; else it exits, and so
// does the sandbox.
const helperScript = `exec 3>&-
cd "$3" || exit 126
echo 1000 >/proc/self/oom_score_adj 2>/dev/null
ulimit -p "$4" 2>/dev/null || ulimit -u "$4" 2>/dev/null || { echo "sandbox: cannot set the process limit" >&2; exit 126; }
fsize() { while read -r a b c s h _; do [ "$a $b $c" = "Max file size" ] && [ "$s" = "$1" ] && [ "$h" = "$1" ] && return 0; done </proc/self/limits; return 1; }
alone() {
  for p in /proc/[0-9]*; do
    n=${p#/proc/}
    case $n in 1|$$) continue;; esac
    read -r st 2>/dev/null <"$p/stat" || continue
    set -- ${st##*") "}
    case $1 in Z*|X*) continue;; esac
    return 1
  done
  return 0
}
list() { r=; for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do if [ -e "$f" ] || [ -L "$f" ]; then r=$r$f/; fi; done; }
tidy() {
  list /tmp; t=$r; list /dev/shm
  if [ "$t" != "$t0" ] || [ "$r" != "$s0" ]; then
    set --
    for f in /tmp/* /tmp/.[!.]* /tmp/..?* /dev/shm/* /dev/shm/.[!.]* /dev/shm/..?*; do
      case $t0$s0 in *"$f/"*) continue;; esac
      if [ -e "$f" ] || [ -L "$f" ]; then set -- "$@" "$f"; fi
    done
    rm -rf -- "$@" 2>/dev/null
    list /tmp; t=$r; list /dev/shm
    [ "$t" = "$t0" ] && [ "$r" = "$s0" ] || return 1
  fi
  for f in shm msg sem; do
    k=0
    while read -r _; do k=$((k+1)); done </proc/sysvipc/$f || return 1
    [ "$k" -le 1 ] || return 1
  done
  return 0
}
list /tmp; t0=$r; list /dev/shm; s0=$r
unit=0
if (ulimit -f 2048 && fsize 1048576) 2>/dev/null; then unit=512; elif (ulimit -f 1024 && fsize 1048576) 2>/dev/null; then unit=1024; fi
sh1=$1 io=$2 nl='
'
shift 7
echo r >&7
while IFS= read -r f <&6 && [ "$f" = f ]; do
  (
    IFS=' ' read -r fz n id <&6 || exit 125
    c= i=0
    while [ "$i" -lt "$n" ]; do IFS= read -r l <&6 || exit 125; c=$c$l$nl; i=$((i+1)); done
    exec 6<&- 7>&- >"$io/$id" 2>&1
    if [ "$fz" != - ]; then
      ulimit -f $((fz/unit)) 2>/dev/null && [ "$unit" != 0 ] || { echo "sandbox: cannot set the file size limit" >&2; exit 126; }
    fi
    for v do export "$v"; done
    exec "$sh1" -c "${c%?}"
  )
  s=$?
  l=-
  if ! alone; then
    l=left
    i=0
    until alone; do kill -9 -1 2>/dev/null; i=$((i+1)); [ "$i" -lt 10000 ] || exit 1; done
  fi
  echo "d $s $l" >&7
  IFS= read -r k <&6 && [ "$k" = k ] || exit 0
  tidy || exit 0
  echo r >&7
done
`

// helpers are the homes' helpers by spareKey.
type helpers struct {
	mu     sync.Mutex
	m      map[string]*helper
	closed bool
	wg     sync.WaitGroup // helpers being ended
}

// useHelpers reports whether commands run in their home's helper.
func (s *Sandbox) useHelpers() bool {
	return !s.cfg.OneShot && s.cfg.Cgroups != nil && s.proxy == nil
}

// helperFor returns key's helper, idle and made for the home at spec's
// path now, marked busy; or nil when it is busy (the command gets a
// sandbox of its own) or cannot be made.
func (s *Sandbox) helperFor(key string, spec Spec) *helper {
	hs := &s.helpers
	hs.mu.Lock()
	if hs.closed {
		hs.mu.Unlock()
		return nil
	}
	h := hs.m[key]
	if h != nil {
		fi, err := os.Stat(spec.Home)
		if h.dead || err != nil || h.p.home == nil || !os.SameFile(fi, h.p.home) || h.runs >= helperRuns {
			if !h.busy {
				s.endHelper(h)
			}
			h = nil
		} else if h.busy {
			hs.mu.Unlock()
			return nil
		}
	}
	if h != nil {
		h.busy = true
		h.runs++
		h.timer.Stop()
		hs.mu.Unlock()
		return h
	}
	hs.mu.Unlock()
	h, err := s.makeHelper(spec, key)
	if err != nil {
		s.cfg.Logger.Debug("sandbox: a helper could not be made", "err", err)
		return nil
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.closed || hs.m[key] != nil {
		// Another command of the home made one meanwhile: this one
		// serves this command only.
		h.runs = helperRuns
	} else {
		if hs.m == nil {
			hs.m = map[string]*helper{}
		}
		hs.m[key] = h
	}
	h.busy = true
	h.runs++
	return h
}

// makeHelper makes a helper for spec's home, shell and environment.
func (s *Sandbox) makeHelper(spec Spec, key string) (*helper, error) {
	dir, err := os.MkdirTemp("", "toolruntime-io-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p, err := s.prepare(spec, true, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	h := &helper{key: key, p: p, ctl: p.ctl, ioDir: dir, pid: p.helperPid, ev: make(chan event, 8)}
	h.timer = time.AfterFunc(time.Hour, func() {}) // replaced when idle
	h.timer.Stop()
	if !p.ready || h.ctl == nil || h.pid <= 0 {
		s.discardHelper(h)
		return nil, errors.New("sandbox: the helper did not start")
	}
	// prepare's deadline for the first "r": the helper speaks next when
	// its command ends, however long that takes.
	_ = h.ctl.SetReadDeadline(time.Time{})
	pid1 := p.pid1
	h.pids = []int{p.run.Cmd.Process.Pid, pid1, h.pid}
	h.reading = true
	go h.read()
	s.prep(h, true)
	return h, nil
}

// read passes the helper's lines to h.ev, with their writer's pid, until
// the helper's fd 7 closes (the sandbox ended).
func (h *helper) read() {
	defer close(h.ev)
	var pending []byte
	buf := make([]byte, 512)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	for {
		n, oobn, _, _, err := h.ctl.ReadMsgUnix(buf, oob)
		if n == 0 || err != nil {
			return
		}
		pid := 0
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if cred, err := unix.ParseUnixCredentials(&m); err == nil {
					pid = int(cred.Pid)
				}
			}
		}
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.IndexByte(pending, '\n')
			if i < 0 {
				break
			}
			line := string(pending[:i])
			pending = pending[i+1:]
			if line != "" {
				h.ev <- event{line: line, pid: pid}
			}
		}
		if len(pending) > 256 {
			return // not the helper's speech
		}
	}
}

// helperRun is a command run by its home's helper.
type helperRun struct {
	s       *Sandbox
	h       *helper
	id      string
	fifo    string
	out     *os.File // the FIFO's read end
	wfd     int      // the worker's write end, held until the command ends (-1: closed)
	outDone chan struct{}
	delay   time.Duration
	unbind  func() bool
	ended   bool // the helper said "d"
	code    int
	left    bool
}

// next is what a helper's next command needs, made while the helper
// waits for it (see prep): its cgroup, which the helper has joined, so
// that the command's shell is forked there, and its output FIFO.
type next struct {
	done chan struct{}
	g    *cgroup.Group
	hr   *helperRun
	err  error
}

// prep makes h's next command's cgroup and FIFO, moves the helper into
// that cgroup once it has said "r" (when ready is false), and has it
// fork the command's shell there, which waits for its command: all of it
// before the command comes, off its path.
func (s *Sandbox) prep(h *helper, ready bool) {
	n := &next{done: make(chan struct{})}
	h.next = n
	go func() {
		defer close(n.done)
		// The cgroup and the FIFO while the helper tidies up; the join
		// once it is done (what it forks to tidy is the home's).
		l := s.cfg.Limits
		g, err := s.cfg.Cgroups.New(cgroup.Limits{MemoryBytes: l.Memory, Pids: l.Pids, CPU: l.CPU})
		if err != nil {
			n.err = fmt.Errorf("sandbox: the command's cgroup: %w", err)
			return
		}
		n.g = g
		h.seq++
		hr := &helperRun{s: s, h: h, id: strconv.Itoa(h.seq), wfd: -1, outDone: make(chan struct{})}
		n.hr = hr
		hr.fifo = filepath.Join(h.ioDir, hr.id)
		if n.err = hr.open(s); n.err != nil {
			return
		}
		for !ready {
			e, ok := <-h.ev
			if !ok {
				n.err = errors.New("sandbox: the helper is gone")
				return
			}
			ready = e.line == "r" && e.pid == h.pid
		}
		if n.err = join(g, h.pid); n.err != nil {
			return
		}
		// The helper forks the command's shell now, in g, and it waits
		// for its command: the fork is off the command's path.
		if _, err := io.WriteString(h.p.cmdW, "f\n"); err != nil {
			n.err = fmt.Errorf("sandbox: the helper is gone: %w", err)
		}
	}()
}

// open makes the command's FIFO and opens both its ends.
func (hr *helperRun) open(s *Sandbox) error {
	if err := unix.Mkfifo(hr.fifo, 0o600); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if s.root {
		if err := os.Chown(hr.fifo, s.cfg.UID, s.cfg.GID); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	rfd, err := unix.Open(hr.fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	hr.out = os.NewFile(uintptr(rfd), "output")
	// Held until the command ends: the FIFO's reader sees no end before.
	if hr.wfd, err = unix.Open(hr.fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}

// runInHelper runs spec's command in helper h (busy).
func (s *Sandbox) runInHelper(ctx context.Context, h *helper, spec Spec, out io.Writer, waitDelay time.Duration) (*Run, error) {
	n := h.next
	h.next = nil
	fail := func(err error) (*Run, error) {
		s.retireHelper(h)
		return nil, err
	}
	if n == nil {
		return fail(errors.New("sandbox: the helper has no next command"))
	}
	// Not ctx: a call that ends meanwhile has its command started and
	// killed at once, as a spare's would be (its caller tells why).
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-n.done:
	case <-t.C:
		go func() { <-n.done; n.release() }()
		return fail(errors.New("sandbox: the helper is not ready"))
	}
	if n.err != nil {
		n.release()
		return fail(fmt.Errorf("%w: %w", errHelperGone, n.err))
	}
	hr, g := n.hr, n.g
	hr.delay = waitDelay
	r := &Run{group: g, hr: hr}
	go func() {
		defer close(hr.outDone)
		_, _ = io.Copy(out, hr.out)
	}()
	fz := "-"
	l := s.cfg.Limits
	if spec.FileBytes > 0 && spec.FileBytes < l.FileBytes {
		n := max(spec.FileBytes&^1023, 1024)
		fz = strconv.FormatInt(n, 10)
		r.fileBytes, r.fileWhy = n, spec.FileWhy
	}
	msg := fz + " " + strconv.Itoa(strings.Count(spec.Command, "\n")+1) + " " + hr.id + "\n" + spec.Command + "\n"
	// The call's end ends the sandbox (and so the command): a helper
	// whose command was cut short is not used again.
	hr.unbind = context.AfterFunc(ctx, func() {
		h.p.cancel()
		g.Kill()
	})
	if spec.Ready != nil {
		spec.Ready(r)
	}
	if _, err := io.WriteString(h.p.cmdW, msg); err != nil {
		h.p.cancel() // wait sees the helper's end
	}
	return r, nil
}

// release undoes a next command that will not run.
func (n *next) release() {
	if n.hr != nil {
		n.hr.close()
	}
	if n.g != nil {
		n.g.Kill()
		_ = n.g.Close()
	}
}

// join moves process pid into g.
func join(g *cgroup.Group, pid int) error {
	procs := g.Procs()
	if len(procs) == 0 && g.FD() != nil {
		procs = []string{filepath.Join(g.Dir(), "cgroup.procs")}
	}
	for _, f := range procs {
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("sandbox: cannot join the command's cgroup %s: %w", f, err)
		}
	}
	return nil
}

// wait waits for the helper to say the command ended (or for the
// sandbox's end), moves the helper back into the home's cgroup, lets it
// go on, and waits for the command's output to end.
func (hr *helperRun) wait() error {
	h := hr.h
	e, ok := <-h.ev
	if ok {
		f := strings.Fields(e.line)
		code, err := 0, errors.New("not d")
		if len(f) == 3 && f[0] == "d" && e.pid == h.pid {
			code, err = strconv.Atoi(f[1])
		}
		if err == nil {
			err = join(h.p.run.group, h.pid)
		}
		// While the helper waits for "k", it forks nothing: the home's
		// cgroup holds bwrap, its init and the helper, or the helper
		// is not to be trusted with another command.
		if err == nil && !h.alone() {
			err = errors.New("a process beside the helper")
		}
		if err == nil {
			_, err = io.WriteString(h.p.cmdW, "k\n")
		}
		if err != nil {
			h.p.cancel()
		} else {
			hr.ended, hr.code, hr.left = true, code, f[2] == "left"
		}
	}
	if hr.wfd >= 0 {
		_ = unix.Close(hr.wfd)
		hr.wfd = -1
	}
	t := time.NewTimer(max(hr.delay, time.Second))
	defer t.Stop()
	select {
	case <-hr.outDone:
	case <-t.C:
		hr.out.Close()
		<-hr.outDone
		return errors.New("sandbox: the command's output did not end")
	}
	return nil
}

// close releases the command's FIFO.
func (hr *helperRun) close() {
	if hr.wfd >= 0 {
		_ = unix.Close(hr.wfd)
		hr.wfd = -1
	}
	if hr.out != nil {
		hr.out.Close()
	}
	if hr.fifo != "" {
		_ = os.Remove(hr.fifo)
	}
}

// end releases a command run by a helper: the helper serves its home's
// next command if the command ended and nothing but the helper, bwrap
// and its init was left in the home's cgroup (see wait).
func (hr *helperRun) end(r *Run) (End, error) {
	s := hr.s
	if hr.unbind != nil {
		hr.unbind()
	}
	hr.close()
	e := End{Leftovers: hr.left, FileBytes: r.fileBytes, FileWhy: r.fileWhy}
	// Everything of the command is in its cgroup: Close kills whatever
	// is left there (the helper has killed it already, unless a command
	// took control of it).
	st := r.group.Stats()
	e.OOMKills, e.Failcnt, e.MemoryPeak = st.OOMKills, st.Failcnt, st.Peak
	err := r.group.Close()
	h := hr.h
	if !hr.ended {
		s.retireHelper(h)
		return e, err
	}
	hs := &s.helpers
	hs.mu.Lock()
	h.busy = false
	switch {
	case hs.closed || hs.m[h.key] != h || h.runs >= helperRuns:
		s.endHelper(h)
	default:
		s.prep(h, false)
		h.timer = time.AfterFunc(s.cfg.SpareIdle, func() { s.idleHelper(h) })
	}
	hs.mu.Unlock()
	return e, err
}

// alone reports whether the home's cgroup holds only bwrap, its init and
// the helper: a process the helper forked for itself (a command that
// took control of it) ends the sandbox.
func (h *helper) alone() bool {
	g := h.p.run.group
	procs := g.Procs()
	if len(procs) == 0 {
		procs = []string{filepath.Join(g.Dir(), "cgroup.procs")}
	}
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		for _, l := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(l)
			if err != nil || !slices.Contains(h.pids, pid) {
				return false
			}
		}
	}
	return true
}

// idleHelper ends helper h when no command took it for Config.SpareIdle.
func (s *Sandbox) idleHelper(h *helper) {
	hs := &s.helpers
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if !h.busy {
		s.endHelper(h)
	}
}

// retireHelper ends helper h (busy or not).
func (s *Sandbox) retireHelper(h *helper) {
	hs := &s.helpers
	hs.mu.Lock()
	defer hs.mu.Unlock()
	s.endHelper(h)
}

// endHelper removes h from the helpers and ends its sandbox. hs.mu is
// held.
func (s *Sandbox) endHelper(h *helper) {
	if h.dead {
		return
	}
	h.dead = true
	if s.helpers.m[h.key] == h {
		delete(s.helpers.m, h.key)
	}
	h.timer.Stop()
	s.discardHelper(h)
}

// discardHelper ends h's sandbox and removes its FIFOs' directory, in
// the background (Close waits for it).
func (s *Sandbox) discardHelper(h *helper) {
	hs := &s.helpers
	hs.wg.Add(1)
	h.p.cmdW.Close()
	h.p.cancel()
	go func() {
		defer hs.wg.Done()
		_ = h.p.run.Cmd.Wait()
		_, _ = h.p.run.End()
		if h.ctl != nil {
			h.ctl.Close()
		}
		if h.reading {
			for range h.ev {
			}
		}
		if n := h.next; n != nil {
			<-n.done
			n.release()
		}
		os.RemoveAll(h.ioDir)
	}()
}

// closeHelpers ends every helper; with final, no more are made.
func (s *Sandbox) closeHelpers(final bool) {
	hs := &s.helpers
	hs.mu.Lock()
	if final {
		hs.closed = true
	}
	for _, h := range hs.m {
		h.timer.Stop()
		if !h.busy {
			s.endHelper(h)
		} else {
			h.runs = helperRuns // ended when its command ends
		}
	}
	hs.mu.Unlock()
	if final {
		hs.wg.Wait()
	}
}

// helperStatus is the status of a command a helper ran, as Status reads
// a bwrap's.
func (hr *helperRun) status() (int, syscall.Signal) {
	if !hr.ended {
		return -1, syscall.SIGKILL
	}
	if hr.code > 128 && hr.code < 128+65 {
		return hr.code, syscall.Signal(hr.code - 128)
	}
	return hr.code, 0
}
