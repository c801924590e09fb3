package sandbox

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Defaults of the spares (Config.Spares, Config.SpareIdle).
const (
	DefaultSpares    = 64
	DefaultSpareIdle = 2 * time.Minute
)

// A spare is a sandbox made ahead for a home, shell and environment:
// bwrap has made its namespaces and mounts, its limits and niceness are
// set, its cgroup (and proxy session and bridge) exist, and its wrapper
// waits for the command on cmdW. Making one costs some 10 ms of CPU and
// tens of ms of wall time on a loaded host; with a spare ready, a
// command's start is that of its shell. A spare is used once: every
// command still gets a sandbox, /tmp and cgroup of its own.
type spare struct {
	run    *Run
	cancel func() // kills it (its exec context)
	cmdW   *os.File
	out    *outSwitch
	ready  bool        // the wrapper said it waits
	home   os.FileInfo // the home it binds, when it was made
	timer  *time.Timer
}

// spares are the spares ready, by spareKey, and those being made.
type spares struct {
	mu      sync.Mutex
	ready   map[string]*spare
	filling map[string]chan struct{} // closed when made (or not)
	closed  bool
	wg      sync.WaitGroup // fills and discards under way
}

// spareKey is what a spare must match: the home, the shell and the
// environment (the wrapper's arguments and bwrap's mounts and env).
func spareKey(spec Spec) string {
	return spec.Home + "\x00" + spec.Shell + "\x00" + strings.Join(spec.Env, "\x00")
}

// take removes and returns the spare for key, if one is ready and binds
// the home that is at its path now (a home removed and made again since
// would be the old one): a spare that does not is discarded.
//
// A spare being made is waited for (until ctx ends): it was begun
// before the command, so it is ready sooner than a sandbox begun now.
func (s *Sandbox) take(ctx context.Context, key, home string) *spare {
	m := &s.spares
	m.mu.Lock()
	p := m.ready[key]
	delete(m.ready, key)
	wait := m.filling[key]
	m.mu.Unlock()
	if p == nil && wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return nil
		}
		m.mu.Lock()
		p = m.ready[key]
		delete(m.ready, key)
		m.mu.Unlock()
	}
	if p == nil {
		return nil
	}
	p.timer.Stop()
	fi, err := os.Stat(home)
	if !p.ready || p.home == nil || err != nil || !os.SameFile(fi, p.home) {
		s.discard(p)
		return nil
	}
	return p
}

// refill makes a spare for key in the background, unless one is ready
// or being made, the bound is reached or the sandbox is closed.
func (s *Sandbox) refill(key string, spec Spec) {
	m := &s.spares
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || s.cfg.Spares < 0 || m.ready[key] != nil || m.filling[key] != nil || len(m.ready)+len(m.filling) >= s.cfg.Spares {
		return
	}
	if m.filling == nil {
		m.filling = map[string]chan struct{}{}
	}
	if m.ready == nil {
		m.ready = map[string]*spare{}
	}
	done := make(chan struct{})
	m.filling[key] = done
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(done)
		p, err := s.prepare(spec)
		m.mu.Lock()
		delete(m.filling, key)
		if err != nil || m.closed || !p.ready {
			m.mu.Unlock()
			if err != nil {
				s.cfg.Logger.Debug("sandbox: a spare could not be made", "err", err)
			} else {
				s.discard(p)
			}
			return
		}
		m.ready[key] = p
		p.timer = time.AfterFunc(s.cfg.SpareIdle, func() {
			m.mu.Lock()
			mine := m.ready[key] == p
			if mine {
				delete(m.ready, key)
			}
			m.mu.Unlock()
			if mine {
				s.discard(p)
			}
		})
		m.mu.Unlock()
	}()
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
	m := &s.spares
	for {
		m.wg.Wait()
		m.mu.Lock()
		ready := m.ready
		m.ready = map[string]*spare{}
		n := len(m.filling)
		m.mu.Unlock()
		if len(ready) == 0 && n == 0 {
			return
		}
		for _, p := range ready {
			p.timer.Stop()
			s.discard(p)
		}
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
