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
	"time"

	"github.com/agentbull/toolruntime/internal/netguard"
)

// proxy is the egress proxy of sandboxed commands: HTTP forwarding of
// absolute http:// URLs and CONNECT tunnels, every connection dialed
// through the guard. It listens on a unix socket, the only way out of a
// sandbox.
type proxy struct {
	path  string // the socket
	dir   string
	guard *netguard.Guard
	tr    *http.Transport
	srv   *http.Server
	ln    net.Listener
	log   *slog.Logger
	done  chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]struct{} // tunnels, closed with the proxy
}

// hopHeaders are the hop-by-hop headers a proxy does not forward.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func startProxy(g *netguard.Guard, chown bool, uid, gid int, log *slog.Logger) (*proxy, error) {
	dir, err := os.MkdirTemp("", "toolruntime-proxy-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: proxy socket directory: %w", err)
	}
	p := &proxy{path: filepath.Join(dir, "proxy.sock"), dir: dir, guard: g, log: log, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	fail := func(err error) (*proxy, error) {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandbox: proxy: %w", err)
	}
	if p.ln, err = net.Listen("unix", p.path); err != nil {
		return fail(err)
	}
	// Only the sandbox's user may connect: the socket's mode and owner,
	// the directory's 0700 keeps everyone else off the host path.
	if err := os.Chmod(p.path, 0o600); err != nil {
		return fail(err)
	}
	if chown {
		if err := os.Chown(p.path, uid, gid); err != nil {
			return fail(err)
		}
	}
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
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(p.ln)
	}()
	return p, nil
}

func (p *proxy) close() error {
	err := p.srv.Close()
	<-p.done
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.tr.CloseIdleConnections()
	os.RemoveAll(p.dir)
	return err
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
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

func (p *proxy) connect(w http.ResponseWriter, r *http.Request) {
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
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "sandbox proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	p.track(down, up)
	defer p.untrack(down, up)
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
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if c, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = c.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, down)
	go pipe(down, up)
	<-done
	<-done
}

func (p *proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
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
