package mcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/internal/cgroup"
	"github.com/agentbull/toolruntime/internal/netguard"
	"github.com/agentbull/toolruntime/internal/tokenvault"
	"github.com/agentbull/toolruntime/tool"
)

// Defaults of a zero Options.
const (
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = 30 * time.Second
	DefaultMaxResultBytes = 256 << 10
	// Bounds of one server's tool listing: past one, the listing stops,
	// keeps the tools that fit, and says so in a note and a log line.
	DefaultMaxListPages = 20
	DefaultMaxListTools = 1000
	DefaultMaxListBytes = 4 << 20
	DefaultListTimeout  = 20 * time.Second
	// DefaultMaxMessageBytes bounds one JSON response of a streamable
	// HTTP server, as the SDK bounds a stdio server's messages (16 MiB).
	DefaultMaxMessageBytes = sdk.DefaultMaxLineLength
	// Bounds of one stdio server's own cgroup (Options.Cgroups): all the
	// memory its processes hold, their processes and threads, and CPU
	// cores. An npx-started Node server holds about 100 MiB and 30
	// threads.
	DefaultServerMemory = 512 << 20
	DefaultServerPids   = 256
	DefaultServerCPU    = 1.0
	// DefaultMaxSessions bounds one oauth server's per-owner sessions.
	DefaultMaxSessions = 256
)

// ErrClosed is returned for servers of a Manager that was closed.
var ErrClosed = errors.New("mcp manager closed")

// Options tune a Manager. The zero value works.
type Options struct {
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MinBackoff and MaxBackoff space the attempts to start a session
	// with a server that could not be reached: the wait doubles from
	// MinBackoff after each failed attempt, up to MaxBackoff, and an
	// attempt that succeeds resets it. While it lasts, the server's tools
	// fail at once instead of trying again.
	MinBackoff, MaxBackoff time.Duration
	// MaxResultBytes bounds the text one call gives the model; the rest
	// is cut with a note saying how much was left out.
	MaxResultBytes int
	// Version is the client version sent to servers.
	Version string
	// MaxListPages, MaxListTools and MaxListBytes (the tools'
	// definitions as JSON) bound one server's tools/list, and ListTimeout
	// the time it takes; zero: the defaults.
	MaxListPages, MaxListTools, MaxListBytes int
	ListTimeout                              time.Duration
	// MaxMessageBytes bounds one JSON response of an HTTP server (0:
	// DefaultMaxMessageBytes); a larger one fails its request.
	MaxMessageBytes int
	// Cgroups, when set, runs each stdio server's session in a cgroup of
	// its own beneath it, bounded by Limits (a zero field: its
	// DefaultServer value); the group is killed and removed when the
	// session ends. A server its memory limit killed is reported as such
	// in the call's error and the catalog's note. Without it, servers
	// only raise their oom_score_adj to 1000.
	Cgroups *cgroup.Manager
	Limits  cgroup.Limits
	// Vault keeps the tokens of the servers configured with oauth
	// (authorization code grant); without one, their calls end
	// auth_required.
	Vault *tokenvault.Vault
	// Guard dials every request of a server configured with oauth, and
	// of its authorization server (nil: public addresses only); a
	// server's allow_private lifts it.
	Guard *netguard.Guard
	// ConnectURL is the console's connect page, the default of each
	// server's oauth.connect_url.
	ConnectURL string
	// MaxSessions bounds the sessions per server kept for credential
	// owners (0: DefaultMaxSessions); the least recently used is closed.
	MaxSessions int
}

// Manager owns one client session per configured server. Sessions start
// when a turn first needs the server, are shared by every turn on the
// worker, and are started again after the server died. It is safe for
// concurrent use.
type Manager struct {
	opts    Options
	log     *slog.Logger
	names   []string
	servers map[string]*server
	// bg tracks the goroutines that watch and close sessions, so that
	// Close returns only once every child process is reaped.
	bg      sync.WaitGroup
	bgMu    sync.Mutex
	closing bool
	// dials counts the attempts to start a session under way.
	dials sync.WaitGroup
}

// spawn runs f on a goroutine that Close waits for. Once Close has begun
// it refuses (false) and f is not run.
func (m *Manager) spawn(f func()) bool {
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	if m.closing {
		return false
	}
	m.bg.Go(f)
	return true
}

// NewManager checks cfg and returns a Manager for it. Nothing is started
// until a turn needs it.
func NewManager(cfg Config, opts Options) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	opts.MaxListPages = cmp.Or(max(opts.MaxListPages, 0), DefaultMaxListPages)
	opts.MaxListTools = cmp.Or(max(opts.MaxListTools, 0), DefaultMaxListTools)
	opts.MaxListBytes = cmp.Or(max(opts.MaxListBytes, 0), DefaultMaxListBytes)
	opts.ListTimeout = cmp.Or(max(opts.ListTimeout, 0), DefaultListTimeout)
	opts.MaxMessageBytes = cmp.Or(max(opts.MaxMessageBytes, 0), DefaultMaxMessageBytes)
	opts.Limits.MemoryBytes = cmp.Or(max(opts.Limits.MemoryBytes, 0), DefaultServerMemory)
	opts.Limits.Pids = cmp.Or(max(opts.Limits.Pids, 0), DefaultServerPids)
	opts.Limits.CPU = cmp.Or(max(opts.Limits.CPU, 0), DefaultServerCPU)
	opts.MaxSessions = cmp.Or(max(opts.MaxSessions, 0), DefaultMaxSessions)
	if opts.Guard == nil {
		opts.Guard = netguard.New(nil, nil)
	}
	m := &Manager{opts: opts, log: opts.Logger, names: cfg.names(), servers: map[string]*server{}}
	for _, name := range m.names {
		s := &server{name: name, cfg: cfg.Servers[name], m: m, log: m.log.With("mcp_server", name), slots: map[string]*slot{}}
		s.client = sdk.NewClient(&sdk.Implementation{Name: "turn-worker", Version: opts.Version}, &sdk.ClientOptions{
			// No roots: a server keeps the directories it was configured
			// with instead of asking the worker for its own.
			Capabilities:           &sdk.ClientCapabilities{},
			ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { s.changes.Add(1) },
			MultiRoundTrip:         inputRoundTrips(), // input requests go to a person (input.go)
			ElicitationHandler:     s.elicit,
			ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
				s.progress.notify(r.Params)
			},
			Logger: s.log,
		})
		m.servers[name] = s
	}
	return m, nil
}

// Servers returns the configured server names, sorted.
func (m *Manager) Servers() []string { return m.names }

// Close ends every session: each stdio child has its stdin closed, is
// given time to exit, then terminated, and is reaped. Calls still running
// fail. Close waits for all of it; later uses of the manager's tools fail
// with ErrClosed.
func (m *Manager) Close() error {
	m.bgMu.Lock()
	m.closing = true
	m.bgMu.Unlock()
	var wg sync.WaitGroup
	for _, s := range m.servers {
		wg.Go(s.close)
	}
	wg.Wait()
	m.dials.Wait()
	m.bg.Wait()
	return nil
}

// server is one configured server and its current session.
type server struct {
	name   string
	cfg    ServerConfig
	m      *Manager
	log    *slog.Logger
	client *sdk.Client
	// changes counts tools/list_changed notifications: a session's cached
	// tool list is good while it has not moved.
	changes atomic.Uint64
	// progress routes progress notifications to the running calls.
	progress progressRoutes
	// asking holds the running calls an elicitation may be for (input.go).
	asking liveCalls

	mu sync.Mutex
	// slots are the server's sessions by credential owner: "" for a
	// server without per-owner tokens, else the owner (ownerOf). One
	// owner's session never carries another's token.
	slots  map[string]*slot
	closed bool
	// cc is the client credentials handler of a server configured with
	// that grant: one identity, the worker's, for every call.
	ccOnce sync.Once
	cc     auth.OAuthHandler
	ccErr  error

	buildMu sync.Mutex
	built   *toolSet // the tools of the last list, kept while it is unchanged
	// lastPrivate: the last list was "private" (listcache.go).
	lastPrivate bool
	// shared is the digest of the list last kept for unconnected
	// owners (listshare.go).
	keptList [32]byte
	// connect is the ConnectTool stand-in (unlisted.go).
	connectOnce sync.Once
	connect     *tool.Tool
	connectErr  error
}

// slot is one owner's session with a server, and its attempts to start
// one; server.mu guards it.
type slot struct {
	owner    string
	conn     *conn
	dialing  chan struct{} // closed when the running attempt to connect ends
	failures int           // consecutive failed attempts
	retryAt  time.Time     // no attempt before this
	lastErr  error
	lastUse  time.Time
}

// conn is one client session.
type conn struct {
	slot  *slot
	cs    *sdk.ClientSession
	cmd   *exec.Cmd     // the child of a stdio server
	group *cgroup.Group // the child's cgroup, or nil
	done  chan struct{} // closed when the session ended
	// death says why the server ended when its cgroup knows (its memory
	// limit killed it); set before done is closed.
	death string
	once  sync.Once

	mu      sync.Mutex
	tools   *toolSet
	version uint64    // server.changes when tools was listed
	cache   listCache // how long tools is good for (listcache.go)
}

// close ends the session (closing waits for a child to exit), then kills
// what is left in the child's cgroup (a grandchild) and has it removed.
// Every caller returns once it is done.
func (c *conn) close() {
	c.once.Do(func() {
		_ = c.cs.Close()
		_ = c.group.Close()
	})
}

// why is err with the reason the server ended, when its cgroup knows
// one. It waits a moment for the session's end to be recorded: the call
// that saw the connection go may see it before the watcher does.
func (c *conn) why(err error) error {
	if c.group == nil {
		return err
	}
	select {
	case <-c.done:
	case <-time.After(stdioWaitDelay):
	}
	if c.ended() && c.death != "" {
		return fmt.Errorf("%s: %w", c.death, err)
	}
	return err
}

func (c *conn) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// DownError says that a server could not be reached and when the next
// attempt will be made.
type DownError struct {
	Server  string
	Err     error
	RetryAt time.Time
}

func (e *DownError) Error() string {
	wait := time.Until(e.RetryAt).Round(100 * time.Millisecond)
	if wait > 0 {
		return fmt.Sprintf("mcp server %q is unavailable (%v); next attempt in %s", e.Server, e.Err, wait)
	}
	return fmt.Sprintf("mcp server %q is unavailable (%v)", e.Server, e.Err)
}

func (e *DownError) Unwrap() error { return e.Err }

// connection returns the live session of the credential owner ctx's call
// or turn runs for, starting one when there is none or the last one
// ended. One attempt per owner runs at a time; callers wait for it until
// their ctx ends.
func (s *server) connection(ctx context.Context) (*conn, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		sl := s.slots[owner]
		if sl == nil {
			sl = &slot{owner: owner, lastUse: time.Now()}
			s.slots[owner] = sl
			s.evict()
		}
		sl.lastUse = time.Now()
		if c := sl.conn; c != nil {
			if !c.ended() {
				s.mu.Unlock()
				return c, nil
			}
			// The server went away between uses: reap it and start anew.
			sl.conn = nil
			s.mu.Unlock()
			s.log.Warn("mcp session ended; reconnecting")
			s.retire(c)
			continue
		}
		ch := sl.dialing
		if ch == nil {
			if time.Now().Before(sl.retryAt) {
				err := &DownError{Server: s.name, Err: sl.lastErr, RetryAt: sl.retryAt}
				s.mu.Unlock()
				return nil, err
			}
			ch = make(chan struct{})
			sl.dialing = ch
			// Close waits for attempts under way (none start once it
			// began: s.closed is checked above, under the same lock).
			s.m.dials.Add(1)
			// The attempt is the server's, not the caller's: it runs to
			// its connect timeout even when the caller gives up (a
			// catalog request's deadline), so that a server slow to start
			// (an npx fetching it) is up for the next turn instead of
			// being started from nothing again by each one.
			go func() {
				defer s.m.dials.Done()
				_, _ = s.attempt(context.WithoutCancel(ctx), sl, ch)
			}()
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		// An attempt that needs a person is not remembered (no backoff):
		// its outcome is the waiting callers' to see, and the next call
		// tries again, the account connected or not.
		s.mu.Lock()
		err, c := sl.lastErr, sl.conn
		s.mu.Unlock()
		var ae *AuthRequiredError
		if c == nil && errors.As(err, &ae) {
			return nil, err
		}
	}
}

// evict closes the least recently used idle owner session when the
// server holds more than the Manager's bound; s.mu is held.
func (s *server) evict() {
	if len(s.slots) <= s.m.opts.MaxSessions {
		return
	}
	var oldest *slot
	for _, sl := range s.slots {
		if sl.dialing == nil && (oldest == nil || sl.lastUse.Before(oldest.lastUse)) {
			oldest = sl
		}
	}
	if oldest == nil {
		return
	}
	delete(s.slots, oldest.owner)
	if c := oldest.conn; c != nil {
		oldest.conn = nil
		go s.retire(c)
	}
}

// attempt runs one attempt to start a session and records its outcome;
// ch is closed when it is recorded.
func (s *server) attempt(ctx context.Context, sl *slot, ch chan struct{}) (*conn, error) {
	c, err := s.dial(ctx, sl)
	s.mu.Lock()
	defer s.mu.Unlock()
	sl.dialing = nil
	defer close(ch)
	var ae *AuthRequiredError
	switch {
	case errors.Is(err, ErrClosed):
		return nil, err
	case errors.As(err, &ae):
		// No backoff: a person may connect the account any moment.
		sl.lastErr = ae
		return nil, ae
	case err != nil:
		sl.failures++
		sl.retryAt = time.Now().Add(s.backoff(sl))
		sl.lastErr = err
		s.log.Warn("mcp server unavailable", "err", err, "failures", sl.failures)
		return nil, &DownError{Server: s.name, Err: err, RetryAt: sl.retryAt}
	case s.closed:
		// Close began while this attempt ran and does not know of c.
		c.close()
		return nil, ErrClosed
	}
	sl.failures, sl.retryAt, sl.lastErr = 0, time.Time{}, nil
	sl.conn = c
	return c, nil
}

// backoff is the wait after the current run of failures; s.mu is held.
func (s *server) backoff(sl *slot) time.Duration {
	d := s.m.opts.MinBackoff
	for i := 1; i < sl.failures && d < s.m.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.m.opts.MaxBackoff)
}

// dial starts a session: the child process or HTTP session, then the MCP
// initialization, within the connect timeout.
func (s *server) dial(ctx context.Context, sl *slot) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.connectTimeout())
	defer cancel()
	t, cmd, g, err := s.transport(sl.owner)
	if err != nil {
		return nil, err
	}
	auth := &authSeen{}
	cs, err := s.client.Connect(context.WithValue(ctx, authSeenKey{}, auth), t, nil)
	if err != nil {
		if ae := auth.get(); ae != nil && !authFailure(err) {
			// Refused for want of an account, whatever the SDK tried
			// after (authSeen).
			err = ae
		}
		if cmd != nil && cmd.Process != nil && cmd.ProcessState == nil {
			// Connect closes the session it could not initialize, which
			// reaps the child; this is for a child it never got to.
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if why := s.death(g); why != "" {
			err = fmt.Errorf("%s: %w", why, err)
		}
		_ = g.Close()
		return nil, err
	}
	c := &conn{slot: sl, cs: cs, cmd: cmd, group: g, done: make(chan struct{})}
	watching := s.m.spawn(func() {
		err := cs.Wait()
		c.death = s.death(g)
		close(c.done)
		s.log.Debug("mcp session ended", "err", err)
		if c.death != "" {
			s.log.Warn("mcp server killed by its cgroup's memory limit", "limit_bytes", s.m.opts.Limits.MemoryBytes)
		}
		// A session that ended by itself (the child died) is closed now:
		// its child reaped, whatever it left in its cgroup killed.
		c.close()
	})
	if !watching {
		c.close()
		return nil, ErrClosed
	}
	attrs := []any{"protocol", cs.InitializeResult().ProtocolVersion}
	if cmd != nil {
		attrs = append(attrs, "pid", cmd.Process.Pid)
	}
	if g != nil {
		attrs = append(attrs, "cgroup", g.Dir())
	}
	s.log.Info("mcp session started", attrs...)
	return c, nil
}

// drop forgets c after an error that says its connection is gone; the
// next use starts a new session.
func (s *server) drop(c *conn, err error) {
	s.mu.Lock()
	if sl := c.slot; sl != nil && sl.conn == c {
		sl.conn = nil
		s.log.Warn("mcp connection lost; the next use reconnects", "err", err)
	}
	s.mu.Unlock()
	s.retire(c)
}

// retire closes c in the background (closing waits for a child to exit);
// Manager.Close waits for it. Once Close has begun, c is closed at once.
func (s *server) retire(c *conn) {
	if !s.m.spawn(c.close) {
		c.close()
	}
}

// death says why the server in g ended, when g's counters know: "" but
// for a server its memory limit killed.
func (s *server) death(g *cgroup.Group) string {
	if g == nil || g.Stats().OOMKills == 0 {
		return ""
	}
	return fmt.Sprintf("the server was killed by its memory limit (its processes may hold %s)", size(s.m.opts.Limits.MemoryBytes))
}

func size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	var cs []*conn
	for _, sl := range s.slots {
		if sl.conn != nil {
			cs = append(cs, sl.conn)
			sl.conn = nil
		}
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.close()
	}
}

// lost reports whether err means the session's connection is gone, as
// opposed to the server answering with an error. Transport failures are
// looked for first: the SDK wraps a failed HTTP request in a JSON-RPC
// error ("rejected by transport") around the network error.
func lost(c *conn, err error) bool {
	if c.ended() {
		return true
	}
	if authFailure(err) {
		return false // the connection is sound; the owner's token is not
	}
	var ne net.Error
	var errno syscall.Errno
	if errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, sdk.ErrSessionMissing) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.As(err, &ne) || errors.As(err, &errno) {
		return true
	}
	var we *jsonrpc.Error
	return !errors.As(err, &we)
}
