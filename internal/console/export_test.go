package console

import "net"

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
