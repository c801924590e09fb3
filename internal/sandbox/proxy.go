package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbull/toolruntime/internal/netguard"
)

// Bounds of the proxy's connections, per command.
const (
	// DefaultProxyIdle closes a tunnel or connection through which no
	// byte passed, either way, for this long.
	DefaultProxyIdle = 5 * time.Minute
	// DefaultProxyConns bounds the connections one command has open to
	// the proxy at once, tunnels included; more are refused with 503.
	DefaultProxyConns = 64
)

// proxy is the egress proxy of sandboxed commands: HTTP forwarding of
// absolute http:// URLs and CONNECT tunnels, every connection dialed
// through the guard. Each command gets a session of its own: a unix
// socket (the only way out of its sandbox) whose connections and tunnels
// are all closed when the command ends.
type proxy struct {
	dir      string
	guard    *netguard.Guard
	tr       *http.Transport
	log      *slog.Logger
	chown    bool
	uid, gid int
	idle     time.Duration
	maxConns int
	// refusing bounds the refusals being answered at once.
	refusing chan struct{}

	mu       sync.Mutex
	next     int
	sessions map[*session]struct{}
}

// hopHeaders are the hop-by-hop headers a proxy does not forward.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func startProxy(g *netguard.Guard, chown bool, uid, gid int, idle time.Duration, maxConns int, log *slog.Logger) (*proxy, error) {
	dir, err := os.MkdirTemp("", "toolruntime-proxy-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: proxy socket directory: %w", err)
	}
	if idle <= 0 {
		idle = DefaultProxyIdle
	}
	if maxConns <= 0 {
		maxConns = DefaultProxyConns
	}
	p := &proxy{dir: dir, guard: g, log: log, chown: chown, uid: uid, gid: gid, idle: idle, maxConns: maxConns, refusing: make(chan struct{}, 64), sessions: map[*session]struct{}{}}
	p.tr = &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
		DisableCompression:    true,
	}
	return p, nil
}

// close ends every session and removes the sockets.
func (p *proxy) close() error {
	p.mu.Lock()
	ss := make([]*session, 0, len(p.sessions))
	for s := range p.sessions {
		ss = append(ss, s)
	}
	p.mu.Unlock()
	var errs []error
	for _, s := range ss {
		errs = append(errs, s.close())
	}
	p.tr.CloseIdleConnections()
	errs = append(errs, os.RemoveAll(p.dir))
	return errors.Join(errs...)
}

// session is one command's part of the proxy.
type session struct {
	p      *proxy
	path   string
	ln     net.Listener
	srv    *http.Server
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu       sync.Mutex
	closed   bool
	conns    map[net.Conn]struct{} // every connection, both ends of tunnels included
	accepted int                   // the command's connections to the proxy open
}

// session opens a socket for one command.
func (p *proxy) session() (*session, error) {
	p.mu.Lock()
	p.next++
	path := filepath.Join(p.dir, fmt.Sprintf("%d.sock", p.next))
	p.mu.Unlock()
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("sandbox: proxy: %w", err)
	}
	// Only the sandbox's user may connect: the socket's mode and owner,
	// the directory's 0700 keeps everyone else off the host path.
	err = os.Chmod(path, 0o600)
	if err == nil && p.chown {
		err = os.Chown(path, p.uid, p.gid)
	}
	if err != nil {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("sandbox: proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{p: p, path: path, cancel: cancel, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	s.ln = &sessionListener{Listener: ln, s: s}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       p.idle,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	p.mu.Lock()
	p.sessions[s] = struct{}{}
	p.mu.Unlock()
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(s.ln)
	}()
	return s, nil
}

// close closes the session's socket and every connection and tunnel
// through it, and cancels its dials and requests under way.
func (s *session) close() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		err = s.srv.Close()
		<-s.done
		s.mu.Lock()
		s.closed = true
		conns := make([]net.Conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		// Unlocked: a trackedConn's Close takes the lock.
		for _, c := range conns {
			c.Close()
		}
		os.Remove(s.path)
		s.p.mu.Lock()
		delete(s.p.sessions, s)
		s.p.mu.Unlock()
	})
	return err
}

// closeNil closes s, if any.
func (s *session) closeNil() {
	if s != nil {
		_ = s.close()
	}
}

// sessionListener tracks the session's connections, and refuses those
// over the proxy's bound with 503.
type sessionListener struct {
	net.Listener
	s *session
}

func (l *sessionListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		s := l.s
		s.mu.Lock()
		closed := s.closed
		ok := !closed && s.accepted < s.p.maxConns
		tc := &trackedConn{Conn: c, s: s}
		if ok {
			s.conns[tc] = struct{}{}
			s.accepted++
		}
		s.mu.Unlock()
		if ok {
			return tc, nil
		}
		select {
		case s.p.refusing <- struct{}{}:
			go func() {
				defer func() { <-s.p.refusing }()
				s.p.tooMany(c, closed)
			}()
		default:
			c.Close() // a flood of them: no answer
		}
	}
}

// tooMany answers a connection over the bound and closes it.
func (p *proxy) tooMany(c net.Conn, closed bool) {
	defer c.Close()
	if closed {
		return
	}
	p.log.Debug("sandbox proxy refused a connection", "reason", "too many connections", "max", p.maxConns)
	msg := fmt.Sprintf("sandbox proxy: refused: the command has %d connections open through the proxy, the most it may; close some first\n", p.maxConns)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
	// Read what the client sent before closing: closing with unread
	// bytes resets the connection, and the answer may be lost.
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// trackedConn leaves its session's set when closed.
type trackedConn struct {
	net.Conn
	s    *session
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.accepted--
		c.s.mu.Unlock()
	})
	return err
}

// CloseWrite half-closes the connection, as the tunnel does on EOF.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// track adds an upstream connection to the session; false when the
// session has ended (the connection is then closed).
func (s *session) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *session) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *session) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		s.connect(w, r)
		return
	}
	s.p.forward(w, r)
}

// forward forwards an absolute http:// request.
func (p *proxy) forward(w http.ResponseWriter, r *http.Request) {
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		http.Error(w, "sandbox proxy: send absolute http:// URLs, or CONNECT host:port for anything else (https)", http.StatusBadRequest)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		p.refuse(w, r.URL.Host, err)
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (s *session) connect(w http.ResponseWriter, r *http.Request) {
	p := s.p
	host := r.Host
	if _, port, err := net.SplitHostPort(host); err != nil || port == "" {
		http.Error(w, "sandbox proxy: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	up, err := p.guard.DialContext(ctx, "tcp", host)
	cancel()
	if err != nil {
		p.refuse(w, host, err)
		return
	}
	if !s.track(up) {
		return
	}
	defer s.untrack(up)
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "sandbox proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer down.Close()
	_ = down.SetDeadline(time.Time{})
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		return
	}
	// Bytes the client sent after its request (a TLS hello) are in buf.
	if n := buf.Reader.Buffered(); n > 0 {
		b, _ := buf.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	t := &tunnel{idle: p.idle}
	t.touch()
	done := make(chan error, 2)
	go func() { done <- t.pipe(up, down) }()
	go func() { done <- t.pipe(down, up) }()
	// A direction that ended with EOF half-closes and leaves the other
	// running; any other end (an error, the idle timeout) ends both.
	for range 2 {
		if err := <-done; err != nil {
			up.Close()
			down.Close()
		}
	}
}

// tunnel is one CONNECT tunnel's two directions, closed when neither
// moved a byte for idle.
type tunnel struct {
	idle time.Duration
	last atomic.Int64 // unix nanoseconds of the last byte either way
}

func (t *tunnel) touch() { t.last.Store(time.Now().UnixNano()) }

// pipe copies src to dst until EOF (nil: dst is half-closed) or an error,
// the idle timeout included.
func (t *tunnel) pipe(dst, src net.Conn) error {
	buf := make([]byte, 32<<10)
	for {
		_ = src.SetReadDeadline(time.Now().Add(t.idle))
		n, err := src.Read(buf)
		if n > 0 {
			t.touch()
			_ = dst.SetWriteDeadline(time.Now().Add(t.idle))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
			t.touch()
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			if c, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = c.CloseWrite()
			}
			return nil
		case errors.Is(err, os.ErrDeadlineExceeded) && time.Since(time.Unix(0, t.last.Load())) < t.idle:
			// The other direction moved: not idle.
		default:
			return err
		}
	}
}

// refuse answers a request the proxy could not or would not forward,
// with a reason a person (or model) reading curl's output understands.
func (p *proxy) refuse(w http.ResponseWriter, host string, err error) {
	var blocked *netguard.BlockedError
	if errors.As(err, &blocked) {
		p.log.Debug("sandbox proxy refused a connection", "host", host, "reason", blocked.Reason)
		http.Error(w, fmt.Sprintf("sandbox proxy: refused: %v. Commands reach only public internet addresses (and what the operator allows); loopback, private, link-local (cloud metadata) and other non-public addresses are refused.", blocked), http.StatusForbidden)
		return
	}
	msg := err.Error()
	if strings.Contains(msg, "no such host") || strings.Contains(msg, "no addresses") {
		http.Error(w, "sandbox proxy: "+host+": no such host", http.StatusBadGateway)
		return
	}
	http.Error(w, "sandbox proxy: "+host+": "+msg, http.StatusBadGateway)
}
