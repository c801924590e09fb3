package console

import (
	"net"
	"time"
)

// ListenerCounts is what a listener of Listen counts open: in all, and
// per client address.
func ListenerCounts(ln net.Listener) (total int, per map[string]int) {
	ll := ln.(*limitListener)
	ll.mu.Lock()
	defer ll.mu.Unlock()
	per = map[string]int{}
	for k, v := range ll.per {
		per[k] = v
	}
	return ll.total, per
}

// SetPageBounds sets the weights of page the list's arguments share and
// a step's own page may show (pageShown, stepShown), so that a test
// reaches them with small values.
func SetPageBounds(s *Server, page, step int) { s.bounds = pageBounds{page: page, step: step} }

// SetReadBackWait sets how long a decision's request waits for a worker
// to take it, so that a test reaches the outcome a slower worker gives.
func SetReadBackWait(s *Server, d time.Duration) { s.readBackWait = d }

// ListenerWaiting is how many of a listener's connections wait on their
// clients (the ones it may close to make room).
func ListenerWaiting(ln net.Listener) int {
	ll := ln.(*limitListener)
	ll.mu.Lock()
	defer ll.mu.Unlock()
	return ll.idle.Len()
}
