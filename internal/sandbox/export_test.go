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
		p := s.spares.ready[key]
		s.spares.mu.Unlock()
		if p != nil || time.Now().After(deadline) {
			return p != nil
		}
		time.Sleep(time.Millisecond)
	}
}
