package console

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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
	// Total all of them: a connection past either is closed at once.
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
	return fmt.Sprintf("read header %s, request %s, idle %s, page write %s, live event write %s, %d connections per client address, %d in all",
		l.ReadHeaderTimeout, l.ReadTimeout, l.IdleTimeout, l.WriteTimeout, l.EventWriteTimeout, l.PerClient, l.Total)
}

// HTTPServer is an http.Server for h with the limits' timeouts; serve
// it on Listen's listener for the connection bounds.
func HTTPServer(h http.Handler, l Limits, base context.Context, log *slog.Logger) *http.Server {
	l = l.orDefault()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		IdleTimeout: l.IdleTimeout, WriteTimeout: l.WriteTimeout, MaxHeaderBytes: 64 << 10,
		BaseContext: func(net.Listener) context.Context { return base },
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// Listen wraps ln so that no client address holds more than l.PerClient
// connections and no more than l.Total are open: a connection past a
// bound is closed as soon as it is accepted (logged, at most once a
// second), so that a client that opens connections and keeps them idle
// takes its own share, not every descriptor of the process.
func Listen(ln net.Listener, l Limits, log *slog.Logger) net.Listener {
	l = l.orDefault()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &limitListener{Listener: ln, l: l, log: log, per: map[string]int{}}
}

type limitListener struct {
	net.Listener
	l   Limits
	log *slog.Logger

	mu     sync.Mutex
	per    map[string]int
	total  int
	logged time.Time
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
		over := ""
		switch {
		case ll.total >= ll.l.Total:
			over = fmt.Sprintf("%d connections open, the bound for all clients", ll.total)
		case ll.per[host] >= ll.l.PerClient:
			over = fmt.Sprintf("%d connections open from %s, the bound for one client address", ll.per[host], host)
		}
		if over != "" {
			now := time.Now()
			logIt := now.Sub(ll.logged) > time.Second
			if logIt {
				ll.logged = now
			}
			ll.mu.Unlock()
			if logIt {
				ll.log.Warn("console: connection refused: "+over, "remote", c.RemoteAddr().String())
			}
			_ = c.Close()
			continue
		}
		ll.per[host]++
		ll.total++
		ll.mu.Unlock()
		return &countedConn{Conn: c, release: func() { ll.release(host) }}, nil
	}
}

func (ll *limitListener) release(host string) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.total--
	if ll.per[host]--; ll.per[host] <= 0 {
		delete(ll.per, host)
	}
}

type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
