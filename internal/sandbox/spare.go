package sandbox

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults of the spares (Config.Spares, Config.SpareIdle).
const (
	DefaultSpares    = 64
	DefaultSpareIdle = 2 * time.Minute
)

// A spare is a sandbox made ahead for a home, shell and environment:
// bwrap has made its namespaces and mounts, its limits and niceness are
// set, its cgroup (and proxy session and bridge) exist, and its wrapper
// waits for the command on cmdW. Making one costs milliseconds of CPU
// and more of wall time (on cgroup v1 joining the command's cgroup waits
// for an RCU grace period), more than the command's shell takes to start;
// with a spare ready, a command's start is that of its shell. A spare is used once: every command still
// gets a sandbox, /tmp and cgroup of its own.
type spare struct {
	run    *Run
	cancel func() // kills it (its exec context)
	cmdW   *os.File
	out    *outSwitch
	ready  bool        // the wrapper said it waits
	home   os.FileInfo // the home it binds, when it was made
	timer  *time.Timer
	// A helper's (see helper.go): its fd 7, kept open, and the pids of
	// the helper and of the sandbox's init.
	ctl       *net.UnixConn
	helperPid int
	pid1      int
}

// The depth of a home's spares.
const (
	// maxDepth bounds the spares one home may have at once. One is
	// enough for commands a model's turn apart; commands that follow
	// each other faster than a sandbox is made (a gateway's loop of
	// short commands) need as many as are made in the time of one.
	maxDepth = 8
	// burstGap: a command that follows the last one of its home by more
	// than this (and twice the home's last making) ends a burst: the
	// home's depth goes back to one.
	burstGap = 250 * time.Millisecond
	// extraIdle ends a spare beyond a home's first that no command took
	// for this long (or Config.SpareIdle, if shorter).
	extraIdle = 5 * time.Second
)

// spares are the spares ready, and those being made, by spareKey.
//
// Each home's pool keeps up to its depth (want) of them, made in the
// background at the commands' niceness (Nice: the worker's own work on
// a step comes first). A command that finds none ready raises its home's
// depth by one, up to maxDepth: commands come faster than one spare is
// made. A command after a pause (burstGap) sets it back to one and ends
// the spares beyond it; a spare beyond the first that waits extraIdle is
// ended too. The first spare of a home may use all of Config.Spares,
// further ones only half of it, and a first spare that finds the budget
// spent ends another home's extra one: one home's burst of commands
// never keeps another home from its spare. Spares of a home never serve
// another.
type spares struct {
	mu     sync.Mutex
	pools  map[string]*pool
	total  int // ready and being made, over all pools
	closed bool
	wg     sync.WaitGroup // fills and discards under way
}

// pool is one home's spares.
type pool struct {
	ready   []*spare      // oldest first
	filling int           // being made
	want    int           // depth: spares to keep (1..maxDepth)
	changed chan struct{} // closed (and replaced) when a making ends
	last    time.Time     // the last take
	made    time.Duration // how long the last making took
}

func (pl *pool) held() int { return len(pl.ready) + pl.filling }

// spareKey is what a spare must match: the home, the shell and the
// environment (the wrapper's arguments and bwrap's mounts and env).
func spareKey(spec Spec) string {
	return spec.Home + "\x00" + spec.Shell + "\x00" + strings.Join(spec.Env, "\x00")
}

// take removes and returns the oldest spare for key that is ready and
// binds the home that is at its path now (a home removed and made again
// since would be the old one): those that do not are discarded.
//
// When none is ready but some are being made, the first made is waited
// for (until ctx ends): it was begun before the command, so it is ready
// sooner than a sandbox begun now.
func (s *Sandbox) take(ctx context.Context, key, home string) *spare {
	fi, statErr := os.Stat(home)
	m := &s.spares
	m.mu.Lock()
	defer m.mu.Unlock()
	pl := m.pools[key]
	if pl == nil {
		return nil
	}
	now := time.Now()
	if !pl.last.IsZero() && now.Sub(pl.last) > max(burstGap, 2*pl.made) {
		pl.want = 1
	}
	pl.last = now
	if len(pl.ready) == 0 {
		pl.want = min(maxDepth, pl.want+1)
	}
	for {
		for len(pl.ready) > 0 {
			p := pl.ready[0]
			if statErr != nil || p.home == nil || !os.SameFile(fi, p.home) {
				s.drop(pl, p)
				continue
			}
			pl.ready = pl.ready[1:]
			m.total--
			p.timer.Stop()
			// Beyond the depth (a burst ended): newest first.
			for len(pl.ready) > pl.want {
				s.drop(pl, pl.ready[len(pl.ready)-1])
			}
			m.forget(key, pl)
			return p
		}
		if pl.filling == 0 {
			m.forget(key, pl)
			return nil
		}
		wait := pl.changed
		m.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			m.mu.Lock()
			return nil
		}
		m.mu.Lock()
		if m.pools[key] != pl {
			return nil // dropped
		}
	}
}

// drop removes ready spare p from pool pl and ends it. m.mu is held.
func (s *Sandbox) drop(pl *pool, p *spare) {
	i := slices.Index(pl.ready, p)
	if i < 0 {
		return
	}
	pl.ready = slices.Delete(pl.ready, i, i+1)
	s.spares.total--
	p.timer.Stop()
	s.discard(p)
}

// forget removes pool pl of key when it holds nothing and asks for one
// spare: its next command is as a new home's. m.mu is held.
func (m *spares) forget(key string, pl *pool) {
	if pl.held() == 0 && pl.want <= 1 && m.pools[key] == pl {
		delete(m.pools, key)
	}
}

// sweep removes the pools that hold nothing and whose home ran no
// command for idle (one that asked for more than one spare is kept
// until then, so that a burst's depth lasts from one command to the
// next). m.mu is held.
func (m *spares) sweep(idle time.Duration) {
	for k, pl := range m.pools {
		if pl.held() == 0 && time.Since(pl.last) > idle {
			delete(m.pools, k)
		}
	}
}

// refill makes spares for key in the background up to its home's depth
// (one for a home new here), within the bound, unless the sandbox is
// closed.
func (s *Sandbox) refill(key string, spec Spec) {
	m := &s.spares
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || s.cfg.Spares < 0 {
		return
	}
	pl := m.pools[key]
	if pl == nil {
		if m.pools == nil {
			m.pools = map[string]*pool{}
		}
		m.sweep(s.cfg.SpareIdle)
		pl = &pool{want: 1, changed: make(chan struct{})}
		m.pools[key] = pl
	}
	for pl.held() < pl.want {
		if pl.held() == 0 {
			if m.total >= s.cfg.Spares && !s.evict(key) {
				break
			}
		} else if 2*(m.total+1) > s.cfg.Spares {
			break
		}
		pl.filling++
		m.total++
		m.wg.Add(1)
		go s.fill(key, pl, spec)
	}
	m.forget(key, pl)
}

// evict ends the newest extra spare (beyond the first) of a home other
// than key's, to make room for key's first. m.mu is held.
func (s *Sandbox) evict(key string) bool {
	for k, pl := range s.spares.pools {
		if k != key && len(pl.ready) > 1 {
			pl.want = max(1, pl.want-1)
			s.drop(pl, pl.ready[len(pl.ready)-1])
			return true
		}
	}
	return false
}

// fill makes one spare for pool pl of key, at Nice from its start (see
// spawner): a spare is made beside the worker's work and the commands
// running, not before them.
func (s *Sandbox) fill(key string, pl *pool, spec Spec) {
	m := &s.spares
	defer m.wg.Done()
	begin := time.Now()
	p, err := s.prepare(spec, true, "")
	m.mu.Lock()
	pl.filling--
	close(pl.changed)
	pl.changed = make(chan struct{})
	pl.made = time.Since(begin)
	mine := m.pools[key] == pl
	if err != nil || m.closed || !mine || !p.ready {
		m.total--
		if mine {
			m.forget(key, pl)
		}
		m.mu.Unlock()
		if err != nil {
			s.cfg.Logger.Debug("sandbox: a spare could not be made", "err", err)
		} else {
			s.discard(p)
		}
		return
	}
	idle := s.cfg.SpareIdle
	if len(pl.ready) > 0 {
		idle = s.extraIdle
	}
	pl.ready = append(pl.ready, p)
	p.timer = time.AfterFunc(idle, func() { s.idle(key, pl, p) })
	m.mu.Unlock()
}

// idle ends ready spare p of pool pl (of key), unused for its idle time.
func (s *Sandbox) idle(key string, pl *pool, p *spare) {
	m := &s.spares
	m.mu.Lock()
	defer m.mu.Unlock()
	s.drop(pl, p)
	if m.pools[key] == pl {
		m.forget(key, pl)
	}
}

// discard ends spare p: its sandbox is killed, its cgroup and session
// released.
func (s *Sandbox) discard(p *spare) {
	m := &s.spares
	m.wg.Add(1)
	p.cmdW.Close()
	p.cancel()
	go func() {
		defer m.wg.Done()
		_ = p.run.Cmd.Wait()
		_, _ = p.run.End()
	}()
}

// closeSpares ends every spare and makes no more.
func (s *Sandbox) closeSpares() {
	m := &s.spares
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	s.DropSpares()
}

// DropSpares ends the spares, those ready and those being made, and
// returns when they are gone, their cgroups handed back for removal.
// Commands started later make spares again.
func (s *Sandbox) DropSpares() {
	s.closeHelpers(false)
	s.helpers.wg.Wait()
	m := &s.spares
	for {
		m.wg.Wait()
		m.mu.Lock()
		var ready []*spare
		filling := 0
		for _, pl := range m.pools {
			ready = append(ready, pl.ready...)
			// Emptied here: an idle timer that fired and waits for
			// the lock must not find them to discard a second time.
			pl.ready = nil
			filling += pl.filling
		}
		m.pools = nil
		m.total = filling
		m.mu.Unlock()
		if len(ready) == 0 && filling == 0 {
			return
		}
		for _, p := range ready {
			p.timer.Stop()
			s.discard(p)
		}
	}
}

// spawner starts the spares' first processes from one OS thread kept at
// Nice: niceness is a thread's, and a process forked inherits its
// thread's, so that the whole making (bwrap's setup included, before
// the gate sets pid 1's niceness) yields to the worker. The thread lives
// as long as the Sandbox: a process's parent-death signal (Pdeathsig)
// fires when the thread that forked it ends, not the worker.
type spawner struct {
	once sync.Once
	reqs chan func()
	done chan struct{}
}

// start runs cmd.Start on the spawner's thread.
func (sp *spawner) start(cmd *exec.Cmd) error {
	sp.once.Do(func() {
		sp.reqs, sp.done = make(chan func()), make(chan struct{})
		go func() {
			defer close(sp.done)
			runtime.LockOSThread() // never unlocked: the thread ends with the Sandbox
			_ = unix.Setpriority(unix.PRIO_PROCESS, 0, Nice)
			for f := range sp.reqs {
				f()
			}
		}()
	})
	errc := make(chan error, 1)
	sp.reqs <- func() { errc <- cmd.Start() }
	return <-errc
}

// close ends the spawner's thread, once no spare is being made: the
// commands that run in spares it started are killed with it.
func (sp *spawner) close() {
	sp.once.Do(func() {})
	if sp.reqs != nil {
		close(sp.reqs)
		<-sp.done
		sp.reqs = nil
	}
}

// outSwitch is a spare's output: what bwrap says before the spare is
// taken is kept and written to the command's output once it has one.
type outSwitch struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
}

func (o *outSwitch) set(w io.Writer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.w = w
	if o.buf.Len() > 0 {
		_, _ = w.Write(o.buf.Bytes())
		o.buf.Reset()
	}
}

func (o *outSwitch) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.w == nil {
		if o.buf.Len() < 64<<10 {
			o.buf.Write(b)
		}
		return len(b), nil
	}
	return o.w.Write(b)
}
