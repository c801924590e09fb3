package console

import (
	"net"
	"net/http"
	"strings"
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

// PanicRendering makes the live page's renderer panic on every event
// whose bytes hold marker (the others render as before): a renderer bug
// that a hostile event reaches.
func PanicRendering(s *Server, marker string) {
	s.streams.renderer = func(ev *liveEvent, data []byte) {
		if strings.Contains(string(data), marker) {
			panic("a renderer bug reached by " + marker)
		}
		renderLive(ev, data)
	}
}

// Handle adds a route to the console's own, served as they are (behind
// ServeHTTP's headers, checks and recovery).
func Handle(s *Server, pattern string, h http.HandlerFunc) { s.mux.HandleFunc(pattern, h) }
