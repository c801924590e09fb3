package console

import (
	"container/list"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Limits bound what connections may hold of the console: how long one
// may sit idle or take to send its headers, how many one client address
// and all of them together may keep open, and how long a live stream may
// take to accept one event. The zero value of a field means its default
// (DefaultLimits); docs/operations.md says them.
type Limits struct {
	// ReadHeaderTimeout bounds the time to send a request's headers;
	// ReadTimeout the whole request; IdleTimeout a keep-alive
	// connection between requests; WriteTimeout a page's answer (the
	// live stream sets its own deadline per event, EventWriteTimeout).
	ReadHeaderTimeout, ReadTimeout, IdleTimeout, WriteTimeout time.Duration
	// EventWriteTimeout bounds writing one live event: a stream whose
	// reader stopped reading is dropped when it passes.
	EventWriteTimeout time.Duration
	// PerClient bounds the connections one client address holds open,
	// Total all of them: a connection past either closes the one that
	// has waited longest outside a handler (Listen).
	PerClient, Total int
}

// DefaultLimits are the console's bounds.
var DefaultLimits = Limits{
	ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second,
	WriteTimeout: 60 * time.Second, EventWriteTimeout: 10 * time.Second, PerClient: 128, Total: 2048,
}

func (l Limits) orDefault() Limits {
	d := DefaultLimits
	if l.ReadHeaderTimeout > 0 {
		d.ReadHeaderTimeout = l.ReadHeaderTimeout
	}
	if l.ReadTimeout > 0 {
		d.ReadTimeout = l.ReadTimeout
	}
	if l.IdleTimeout > 0 {
		d.IdleTimeout = l.IdleTimeout
	}
	if l.WriteTimeout > 0 {
		d.WriteTimeout = l.WriteTimeout
	}
	if l.EventWriteTimeout > 0 {
		d.EventWriteTimeout = l.EventWriteTimeout
	}
	if l.PerClient > 0 {
		d.PerClient = l.PerClient
	}
	if l.Total > 0 {
		d.Total = l.Total
	}
	return d
}

// String names the bounds, for the start log.
func (l Limits) String() string {
	l = l.orDefault()
	return fmt.Sprintf("read header %s, request %s, idle %s, page write %s, live event write %s, %d connections per client address, %d in all (past a bound, the one waiting longest on its client for headers, a body, its next request or to read an answer is closed), %d live streams (%d a session; past them, the largest holder's oldest is dropped)",
		l.ReadHeaderTimeout, l.ReadTimeout, l.IdleTimeout, l.WriteTimeout, l.EventWriteTimeout, l.PerClient, l.Total, maxStreams, streamsPerSession)
}

// HTTPServer is an http.Server for h with the limits' timeouts; serve
// it on Listen's listener for the connection bounds.
func HTTPServer(h http.Handler, l Limits, base context.Context, log *slog.Logger) *http.Server {
	l = l.orDefault()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{Handler: bodiesWait(h), ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		IdleTimeout: l.IdleTimeout, WriteTimeout: l.WriteTimeout, MaxHeaderBytes: 64 << 10,
		BaseContext: func(net.Listener) context.Context { return base }, ConnState: connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

type connKey struct{}

// drainAfter is what the server reads of a body its handler left unread
// before it answers (net/http's maxPostHandlerReadBytes): past it, the
// connection is closed instead.
const drainAfter = 256 << 10

// bodiesWait tells the listener that a connection reading its request's
// body waits on its client, as one reading its headers does: from the
// handler's first read of the body to its end, and while what the
// handler left unread is read after it. A client that sends its headers
// whole and trickles the body would otherwise hold a connection "in a
// handler" for the whole request timeout, where no bound may close it:
// as many of them as one address may hold, and a person at that
// address (a judge on loopback, a shared proxy) is refused until they
// stop.
func bodiesWait(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cc := countedOf(r.Context())
		if cc == nil || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		b := &waitingBody{ReadCloser: r.Body, c: cc}
		r.Body = b
		defer cc.l.bodyDone(cc)
		h.ServeHTTP(w, r)
		if !b.started && strings.Contains(strings.ToLower(r.Header.Get("Expect")), "100-continue") {
			return // never asked for: the server closes the connection
		}
		cc.l.bodyWait(cc)
		_, _ = io.CopyN(io.Discard, b.ReadCloser, drainAfter+1)
	})
}

// countedOf is the counted connection a request came on (through TLS,
// the one under it).
func countedOf(ctx context.Context) *countedConn {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	cc, _ := c.(*countedConn)
	return cc
}

// waitingBody is a request body whose first read puts its connection on
// the listener's idle lists.
type waitingBody struct {
	io.ReadCloser
	c       *countedConn
	started bool
}

func (b *waitingBody) Read(p []byte) (int, error) {
	if !b.started {
		b.started = true
		b.c.l.bodyWait(b.c)
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.c.l.bodyDone(b.c)
	}
	return n, err
}

// Listen wraps ln so that no client address holds more than l.PerClient
// connections and no more than l.Total are open. A connection past a
// bound makes room by closing the connection that has waited longest
// without a request in a handler (a new one whose headers have not all
// come, a kept-alive one between requests, one reading its body, or one
// whose answer waits for its client to read it) of that address, or of
// all addresses for l.Total: so a client that opens connections and
// keeps them idle, trickles its requests or never reads the answers
// loses its own oldest ones, and a person's new request is served. Only when every connection in
// the bound is in a handler (bounded by the request and write timeouts,
// live streams by their own bound) is the new one closed. Each is
// logged, at most once a second. Serve the listener with HTTPServer's
// server, which tells it which connections are in a handler.
func Listen(ln net.Listener, l Limits, log *slog.Logger) net.Listener {
	l = l.orDefault()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &limitListener{Listener: ln, l: l, log: log, per: map[string]int{}, idle: list.New(), idlePer: map[string]*list.List{}}
}

type limitListener struct {
	net.Listener
	l   Limits
	log *slog.Logger

	mu  sync.Mutex
	per map[string]int
	// idle and idlePer[host] list the connections outside a handler,
	// the one waiting longest first.
	idle    *list.List
	idlePer map[string]*list.List
	total   int
	logged  time.Time
	// Evicted counts the connections closed to make room, Refused those
	// closed at accept because every one in the bound was busy.
	evicted, refused int
}

func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		ll.mu.Lock()
		var victims []*countedConn
		refuse := ""
		if ll.per[host] >= ll.l.PerClient {
			if v := ll.oldestIdle(host); v != nil {
				victims = append(victims, v)
				ll.forget(v)
			} else {
				refuse = fmt.Sprintf("%d connections open from %s, the bound for one client address, all of them in a request", ll.per[host], host)
			}
		}
		if refuse == "" && ll.total >= ll.l.Total {
			if v := ll.oldestIdle(""); v != nil {
				victims = append(victims, v)
				ll.forget(v)
			} else {
				refuse = fmt.Sprintf("%d connections open, the bound for all clients, all of them in a request", ll.total)
			}
		}
		now := time.Now()
		logIt := now.Sub(ll.logged) > time.Second && (refuse != "" || len(victims) > 0)
		if logIt {
			ll.logged = now
		}
		var cc *countedConn
		if refuse != "" {
			ll.refused++
		} else {
			ll.evicted += len(victims)
			cc = &countedConn{Conn: c, l: ll, host: host}
			ll.per[host]++
			ll.total++
			ll.wait(cc)
		}
		evicted, refused := ll.evicted, ll.refused
		ll.mu.Unlock()
		for _, v := range victims {
			_ = v.Conn.Close()
		}
		if logIt {
			if refuse != "" {
				ll.log.Warn("console: connection refused: "+refuse, "remote", c.RemoteAddr().String(), "refused_so_far", refused)
			} else {
				ll.log.Warn("console: connections bound reached: closed the connection idle longest to make room", "remote", c.RemoteAddr().String(), "closed_so_far", evicted)
			}
		}
		if refuse != "" {
			_ = c.Close()
			continue
		}
		return cc, nil
	}
}

// oldestIdle is the open connection of host (any host when empty) that
// has waited longest outside a handler; nil when all are in one.
func (ll *limitListener) oldestIdle(host string) *countedConn {
	l := ll.idle
	if host != "" {
		if l = ll.idlePer[host]; l == nil {
			return nil
		}
	}
	if e := l.Front(); e != nil {
		return e.Value.(*countedConn)
	}
	return nil
}

// wait puts c last on the idle lists (under ll.mu).
func (ll *limitListener) wait(c *countedConn) {
	ll.unwait(c)
	c.el = ll.idle.PushBack(c)
	pl := ll.idlePer[c.host]
	if pl == nil {
		pl = list.New()
		ll.idlePer[c.host] = pl
	}
	c.elPer = pl.PushBack(c)
}

// unwait takes c off the idle lists (under ll.mu).
func (ll *limitListener) unwait(c *countedConn) {
	c.writing = false
	if c.el == nil {
		return
	}
	ll.idle.Remove(c.el)
	if pl := ll.idlePer[c.host]; pl != nil {
		pl.Remove(c.elPer)
		if pl.Len() == 0 {
			delete(ll.idlePer, c.host)
		}
	}
	c.el, c.elPer = nil, nil
}

// forget takes c out of the counts (under ll.mu), once.
func (ll *limitListener) forget(c *countedConn) {
	if c.gone {
		return
	}
	c.gone = true
	ll.unwait(c)
	ll.total--
	if ll.per[c.host]--; ll.per[c.host] <= 0 {
		delete(ll.per, c.host)
	}
}

// setState is the server's word on c: in a handler, or waiting for a
// request.
func (ll *limitListener) setState(c *countedConn, st http.ConnState) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if c.gone {
		return
	}
	switch st {
	case http.StateActive, http.StateHijacked:
		ll.unwait(c)
	case http.StateNew, http.StateIdle:
		ll.wait(c)
	}
}

// bodyWait puts c, in a handler that reads its request's body, on the
// idle lists: last, once, until bodyDone.
func (ll *limitListener) bodyWait(c *countedConn) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if c.gone || c.el != nil {
		return
	}
	ll.wait(c)
}

// writeWait puts c, writing, on the idle lists (last) unless it is on
// them already, until writeDone.
func (ll *limitListener) writeWait(c *countedConn) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if c.gone || c.el != nil {
		return
	}
	ll.wait(c)
	c.writing = true
}

// writeDone takes c off the idle lists if its write put it there.
func (ll *limitListener) writeDone(c *countedConn) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if c.writing && !c.gone {
		ll.unwait(c)
	}
	c.writing = false
}

// bodyDone takes c off the idle lists: its body is read.
func (ll *limitListener) bodyDone(c *countedConn) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if !c.gone {
		ll.unwait(c)
	}
}

type countedConn struct {
	net.Conn
	l    *limitListener
	host string
	// Under l.mu: its places on the idle lists (nil in a handler), and
	// whether it is out of the counts; writing says that a write put it
	// on the lists (writeWait), to be taken off when the write returns.
	el, elPer *list.Element
	gone      bool
	writing   bool
}

// Write counts c as waiting on its client while the write lasts: a
// write blocks only when the client does not read what it was sent.
// A client that pipelines requests on a kept-alive connection and
// never reads the answers otherwise holds the connection "in a
// handler", writing, for the whole page write timeout, where no bound
// may close it; without logging in (the login page, the static files),
// as many as one address may hold, and a person at that address is
// refused until they stop. A write to a client that reads returns at
// once, and its connection is last on the lists while it lasts.
func (c *countedConn) Write(p []byte) (int, error) {
	c.l.writeWait(c)
	n, err := c.Conn.Write(p)
	c.l.writeDone(c)
	return n, err
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.forget(c)
	c.l.mu.Unlock()
	return err
}

// connState passes the server's connection states to the listener that
// counts them (through TLS, to the connection under it).
func connState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if cc, ok := c.(*countedConn); ok {
		cc.l.setState(cc, st)
	}
}
