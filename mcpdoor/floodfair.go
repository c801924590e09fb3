package mcpdoor

import (
	"context"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The per-principal gates (fastgate.go) bound how many requests of one
// principal a replica holds, but not how much of the machine they take:
// a principal that floods the door with cheap requests (lists,
// malformed or oversized bodies, calls of a fast tool) keeps its few
// slots busy back to back, and the door's goroutines, the bus and the
// workers share the cores with that flood. Another principal's call then
// waits behind the flood at every hand-off between goroutines, and its
// p99 grows with the flood's rate, not with its own load.
//
// fairGate is the door's own work, shared fairly: a request holds one of
// a few door-wide work slots (about one per core) while the door spends
// CPU on it (decoding it, the SDK's session, an answer that needs no
// worker) and gives it back as soon as it waits for something else: the
// fleet (a tools/call gives it back when its handler starts), or the
// client (its first byte written). The body is read before the slot is
// taken, so a slow client never holds one. When every slot is taken, the
// requests that wait are queued per principal and the slots go round
// robin over the principals with requests waiting: a principal with one
// request waits for one slot to free, however many requests another
// principal has queued. While other principals have requests in the
// door, a principal holds at most its share of the slots (slots over
// principals in, at least one), so that a flood does not take them all
// while another principal's call waits for the fleet.

// workWait bounds how long a request waits for a work slot. The wait is
// a turn in a queue whose length the per-principal gates bound, not a
// refusal of a flood (admitWait is that), so it is long: a request
// within its principal's bound is served, late on a saturated machine,
// rather than refused.
const workWait = 10 * time.Second

// fairGate is the door-wide work slots and their queue.
type fairGate struct {
	mu      sync.Mutex
	slots   int
	free    int
	active  map[string]int        // requests in the door, by principal
	held    map[string]int        // work slots held, by principal
	waiting map[string]*fairQueue // by principal, while it has requests waiting
	ring    []*fairQueue          // principals with requests waiting, in turn order
}

type fairQueue struct {
	name    string
	waiters []chan struct{}
}

// workSlots is the default number of door-wide work slots: the door's
// work is CPU, so more at once than cores only queues it in the Go
// scheduler, where no one orders it fairly.
func workSlots() int { return max(2, runtime.GOMAXPROCS(0)) }

func newFairGate(slots int) *fairGate {
	return &fairGate{slots: slots, free: slots, active: map[string]int{}, held: map[string]int{}, waiting: map[string]*fairQueue{}}
}

// enter counts a request of principal name in the door until leave:
// while other principals have requests in the door, a principal holds
// at most its share of the work slots (share), so that a flood cannot
// take them all while another principal's call waits for the fleet.
func (g *fairGate) enter(name string) {
	g.mu.Lock()
	g.active[name]++
	g.mu.Unlock()
}

func (g *fairGate) leave(name string) {
	g.mu.Lock()
	if g.active[name]--; g.active[name] <= 0 {
		delete(g.active, name)
	}
	g.dispatchLocked() // fewer principals: larger shares
	g.mu.Unlock()
}

// share is how many work slots one principal may hold at once.
func (g *fairGate) share() int { return max(1, g.slots/max(1, len(g.active))) }

// acquire takes a work slot for principal name, waiting up to wait (or
// ctx); ok is false when none came.
func (g *fairGate) acquire(ctx context.Context, name string, wait time.Duration) bool {
	g.mu.Lock()
	if g.free > 0 && g.held[name] < g.share() && g.waiting[name] == nil {
		g.free--
		g.held[name]++
		g.mu.Unlock()
		return true
	}
	ch := make(chan struct{}, 1)
	q := g.waiting[name]
	if q == nil {
		q = &fairQueue{name: name}
		g.waiting[name] = q
		g.ring = append(g.ring, q)
	}
	q.waiters = append(q.waiters, ch)
	g.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if q.remove(ch) {
		if len(q.waiters) == 0 {
			g.drop(q)
		}
		return false
	}
	// Granted while giving up: pass the slot on.
	g.releaseLocked(name)
	return false
}

// release gives principal name's work slot back, to the next principal
// in turn with a request waiting and room in its share, else to the
// pool.
func (g *fairGate) release(name string) {
	g.mu.Lock()
	g.releaseLocked(name)
	g.mu.Unlock()
}

func (g *fairGate) releaseLocked(name string) {
	if g.held[name]--; g.held[name] <= 0 {
		delete(g.held, name)
	}
	g.free++
	g.dispatchLocked()
}

// dispatchLocked gives free slots to waiting requests, round robin over
// the principals with room in their share.
func (g *fairGate) dispatchLocked() {
	for g.free > 0 {
		share := g.share()
		i := slices.IndexFunc(g.ring, func(q *fairQueue) bool { return g.held[q.name] < share })
		if i < 0 {
			return
		}
		q := g.ring[i]
		ch := q.waiters[0]
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
		g.ring = slices.Delete(g.ring, i, i+1)
		if len(q.waiters) > 0 {
			g.ring = append(g.ring, q) // its next request waits for its next turn
		} else {
			delete(g.waiting, q.name)
		}
		g.free--
		g.held[q.name]++
		ch <- struct{}{}
	}
}

// drop takes a queue with no waiter left out of the turn order.
func (g *fairGate) drop(q *fairQueue) {
	delete(g.waiting, q.name)
	if i := slices.Index(g.ring, q); i >= 0 {
		g.ring = slices.Delete(g.ring, i, i+1)
	}
}

func (q *fairQueue) remove(ch chan struct{}) bool {
	if i := slices.Index(q.waiters, ch); i >= 0 {
		q.waiters = slices.Delete(q.waiters, i, i+1)
		return true
	}
	return false
}

// workSlot is a request's door-wide work slot, given back once.
type workSlot struct {
	g    *fairGate
	name string
	done atomic.Bool
}

func (s *workSlot) release() {
	if s != nil && s.done.CompareAndSwap(false, true) {
		s.g.release(s.name)
	}
}

// releaseWork gives back the work slot of the request ctx belongs to, if
// it holds one: its handler now waits for the fleet.
func releaseWork(ctx context.Context) {
	if st := stateOf(ctx); st != nil {
		st.work.release()
	}
}

// releasingWriter gives the request's work slot back at the first byte
// (or header) written: from there the request waits for its client.
type releasingWriter struct {
	http.ResponseWriter
	slot *workSlot
}

func (w *releasingWriter) WriteHeader(code int) {
	w.slot.release()
	w.ResponseWriter.WriteHeader(code)
}

func (w *releasingWriter) Write(b []byte) (int, error) {
	w.slot.release()
	return w.ResponseWriter.Write(b)
}

func (w *releasingWriter) Flush() {
	w.slot.release()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *releasingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
