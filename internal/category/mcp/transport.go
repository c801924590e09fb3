package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/internal/cgroup"
)

// inheritedEnv is what a stdio server gets of the worker's environment:
// enough to find programs and a home, none of the worker's secrets.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TMPDIR", "TZ"}

// stdioWaitDelay bounds how long reaping a child waits for its stderr to
// close once it exited (a grandchild may hold it open).
const stdioWaitDelay = 2 * time.Second

// transport builds a fresh transport for one session. For a stdio server
// it also returns the command, whose process the session owns: closing
// the session closes the child's stdin, waits for it to exit (SIGTERM,
// then SIGKILL, if it does not) and reaps it; and, with Options.Cgroups,
// the cgroup the child starts in, which the caller closes after the
// session.
func (s *server) transport(owner string) (sdk.Transport, *exec.Cmd, *cgroup.Group, error) {
	cfg := s.cfg
	if cfg.URL != "" {
		var base http.RoundTripper = http.DefaultTransport
		if o := cfg.OAuth; o != nil {
			// The server's requests carry tokens: each is dialed through
			// the guard, as its authorization server's are.
			g := s.m.opts.Guard
			if o.AllowPrivate {
				g = nil
			}
			base = guardedTransport(g)
		}
		client := &http.Client{Transport: headerTransport{base: base, headers: expandAll(cfg.Headers), maxJSON: int64(s.m.opts.MaxMessageBytes)}}
		h, err := s.oauthHandler(owner)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("oauth: %w", err)
		}
		return &sdk.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: client, OAuthHandler: h}, nil, nil, nil
	}
	var g *cgroup.Group
	if cgs := s.m.opts.Cgroups; cgs != nil {
		var err error
		if g, err = cgs.New(s.m.opts.Limits); err != nil {
			return nil, nil, nil, fmt.Errorf("its cgroup could not be made: %w", err)
		}
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Dir
	cmd.Env = childEnv(cfg.Env)
	cmd.Stderr = &lineLogger{log: s.log}
	cmd.WaitDelay = stdioWaitDelay
	detach(cmd)
	g.Command(cmd)
	return &sdk.CommandTransport{Command: cmd}, cmd, g, nil
}

func childEnv(extra map[string]string) []string {
	var env []string
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+expand(extra[k]))
	}
	return env
}

func expandAll(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = expand(v)
	}
	return out
}

// headerTransport adds the configured headers to every request, and
// bounds every response that is not an event stream to maxJSON bytes (the
// SDK reads a JSON response whole; it bounds each event of a stream).
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	maxJSON int64
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil || t.maxJSON <= 0 || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: t.maxJSON, err: errTooLarge}
	return resp, nil
}

// errTooLarge fails a response over the bound.
var errTooLarge = errors.New("the server's response is larger than the worker takes (mcp MaxMessageBytes)")

// boundedBody fails with err once more than left bytes are read: the
// MCP messages' bound (errTooLarge) and the OAuth answers' (errOAuthTooLarge).
type boundedBody struct {
	io.ReadCloser
	left int64
	err  error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, b.err
	}
	return n, err
}

// lineLogger logs a stdio server's stderr, a line at a time, at debug
// level: servers write their own logs there.
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

// maxLogLine bounds one logged line; the rest of a longer line is dropped.
const maxLogLine = 4 << 10

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > maxLogLine {
		l.emit(l.buf)
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

func (l *lineLogger) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 {
		return
	}
	if len(line) > maxLogLine {
		line = line[:maxLogLine]
	}
	l.log.Debug("mcp server stderr", "line", string(line))
}
