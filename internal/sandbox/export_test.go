package sandbox

import (
	"path/filepath"
	"time"
)

// WaitSpare waits up to d for the spare of spec's home, shell and
// environment to be ready, as a model's turn between two commands
// gives it time to be, and reports whether it is.
func (s *Sandbox) WaitSpare(spec Spec, d time.Duration) bool {
	spec.Home = filepath.Clean(spec.Home)
	key := spareKey(spec)
	deadline := time.Now().Add(d)
	for {
		s.spares.mu.Lock()
		pl := s.spares.pools[key]
		ok := pl != nil && len(pl.ready) > 0
		s.spares.mu.Unlock()
		if ok || time.Now().After(deadline) {
			return ok
		}
		time.Sleep(time.Millisecond)
	}
}

// SpareDepth reports the spares of spec's home: ready, being made, and
// the depth its pool keeps (all 0: it has none).
func (s *Sandbox) SpareDepth(spec Spec) (ready, filling, want int) {
	spec.Home = filepath.Clean(spec.Home)
	s.spares.mu.Lock()
	defer s.spares.mu.Unlock()
	if pl := s.spares.pools[spareKey(spec)]; pl != nil {
		return len(pl.ready), pl.filling, pl.want
	}
	return 0, 0, 0
}

// SparesHeld is the number of spares ready and being made, over all
// homes.
func (s *Sandbox) SparesHeld() int {
	s.spares.mu.Lock()
	defer s.spares.mu.Unlock()
	return s.spares.total
}

// WaitDepth waits up to d for spec's home to have n spares ready.
func (s *Sandbox) WaitDepth(spec Spec, n int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		ready, _, _ := s.SpareDepth(spec)
		if ready >= n || time.Now().After(deadline) {
			return ready >= n
		}
		time.Sleep(time.Millisecond)
	}
}

// SpareGap is how long a pause must be to end a burst of spec's home's
// commands (its depth goes back to one).
func (s *Sandbox) SpareGap(spec Spec) time.Duration {
	spec.Home = filepath.Clean(spec.Home)
	s.spares.mu.Lock()
	defer s.spares.mu.Unlock()
	if pl := s.spares.pools[spareKey(spec)]; pl != nil {
		return max(burstGap, 2*pl.made)
	}
	return burstGap
}

// SetExtraIdle sets how long a home's spares beyond its first wait
// unused before they end (5 s), for tests slower than that.
func (s *Sandbox) SetExtraIdle(d time.Duration) { s.extraIdle = d }
