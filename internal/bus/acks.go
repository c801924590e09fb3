package bus

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// pubAcks routes the answers of a connection's stored writes to the
// publishes waiting for them, through one subscription of its own:
// <inbox>.<id>, an id counted up per publish. nats.go's RequestMsg does
// the same through the connection's shared response map, but makes a
// random token, a channel and a timer per request and takes the
// connection's own lock to file and find them, the lock every publish
// of every handler takes too: a step waits for three such answers. A
// waiter here is kept (channel and timer), and its id is an integer.
type pubAcks struct {
	nc     *nats.Conn
	prefix string // <inbox>.
	sub    *nats.Subscription

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]*ackWaiter
	closed  bool

	waiters sync.Pool // of *ackWaiter
}

// ackWaiter is a publish waiting for its answer: ch gets it, or nil once
// the connection is closed.
type ackWaiter struct {
	ch    chan *nats.Msg
	timer *time.Timer
}

// newPubAcks subscribes to a new inbox of nc for the answers. The
// subscription has no pending limits: an answer dropped as a slow
// consumer's would only time its publish out and have it sent again.
func newPubAcks(nc *nats.Conn) (*pubAcks, error) {
	a := &pubAcks{nc: nc, prefix: nc.NewInbox() + ".", waiting: map[uint64]*ackWaiter{}}
	sub, err := nc.Subscribe(a.prefix+"*", a.deliver)
	if err != nil {
		return nil, err
	}
	_ = sub.SetPendingLimits(-1, -1)
	// Closed with its connection: a publish waiting then is not left to
	// its timeout.
	sub.SetClosedHandler(func(string) { a.close() })
	a.sub = sub
	return a, nil
}

// deliver hands an answer to its waiter; one nobody waits for (its
// publish timed out) is dropped.
func (a *pubAcks) deliver(m *nats.Msg) {
	if len(m.Subject) <= len(a.prefix) {
		return
	}
	id, err := strconv.ParseUint(m.Subject[len(a.prefix):], 36, 64)
	if err != nil {
		return
	}
	a.mu.Lock()
	w := a.waiting[id]
	delete(a.waiting, id)
	a.mu.Unlock()
	if w != nil {
		w.ch <- m // buffered, and this is its only send
	}
}

func (a *pubAcks) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for id, w := range a.waiting {
		delete(a.waiting, id)
		w.ch <- nil
	}
}

// RequestMsg publishes m with a reply subject of a's inbox and waits up
// to timeout for the answer; errors as nats.Conn.RequestMsg's
// (ErrTimeout, ErrNoResponders, ErrConnectionClosed). m.Reply is
// overwritten.
func (a *pubAcks) RequestMsg(m *nats.Msg, timeout time.Duration) (*nats.Msg, error) {
	w, _ := a.waiters.Get().(*ackWaiter)
	if w == nil {
		w = &ackWaiter{ch: make(chan *nats.Msg, 1)}
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		a.waiters.Put(w)
		return nil, nats.ErrConnectionClosed
	}
	a.next++
	id := a.next
	a.waiting[id] = w
	a.mu.Unlock()
	var buf [64]byte
	m.Reply = string(strconv.AppendUint(append(buf[:0], a.prefix...), id, 36))
	if err := a.nc.PublishMsg(m); err != nil {
		a.forget(id, w)
		return nil, err
	}
	if w.timer == nil {
		w.timer = time.NewTimer(timeout)
	} else {
		w.timer.Reset(timeout)
	}
	select {
	case r := <-w.ch:
		w.timer.Stop()
		a.waiters.Put(w)
		if r == nil {
			return nil, nats.ErrConnectionClosed
		}
		if len(r.Data) == 0 && r.Header.Get("Status") == "503" {
			return nil, nats.ErrNoResponders
		}
		return r, nil
	case <-w.timer.C:
		a.forget(id, w)
		return nil, nats.ErrTimeout
	}
}

// forget gives w back once nothing can send to it any more: when the
// answer was taken from the map meanwhile, its send is waited for.
func (a *pubAcks) forget(id uint64, w *ackWaiter) {
	a.mu.Lock()
	_, mine := a.waiting[id]
	delete(a.waiting, id)
	a.mu.Unlock()
	if !mine {
		<-w.ch
	}
	a.waiters.Put(w)
}

// requester sends a request and waits for its answer: a *nats.Conn, or
// a connection's pubAcks.
type requester interface {
	RequestMsg(m *nats.Msg, timeout time.Duration) (*nats.Msg, error)
}

// pubAcksOf keeps the pubAcks of a publisher's connection.
type pubAcksOf struct {
	cur atomic.Pointer[pubAcks]
	mu  sync.Mutex
}

// of is the pubAcks of nc, made on first use; nc itself when its
// subscription cannot be made (a closed connection: its RequestMsg
// says so).
func (o *pubAcksOf) of(nc *nats.Conn) requester {
	if a := o.cur.Load(); a != nil && a.nc == nc {
		return a
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if a := o.cur.Load(); a != nil && a.nc == nc {
		return a
	}
	a, err := newPubAcks(nc)
	if err != nil {
		return nc
	}
	if old := o.cur.Swap(a); old != nil && old.sub != nil {
		_ = old.sub.Unsubscribe()
	}
	return a
}
