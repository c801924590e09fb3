package bus

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOptions configures an in-process NATS server with JetStream.
type EmbeddedOptions struct {
	Host     string // default 127.0.0.1
	Port     int    // default 4222; -1 picks a free port
	HTTPPort int    // monitoring; default 8222, -1 picks a free port, 0 keeps the default
	StoreDir string // JetStream storage directory
	// NoMonitoring turns the monitoring port off.
	NoMonitoring bool
	// MaxStore bounds the JetStream file store, in bytes (0: the server's
	// own default, 75% of the space free in StoreDir at start).
	MaxStore int64
	// Reserve is the space StoreDir's file system must have free before
	// JetStream is restarted after a write error (0: DefaultReserve).
	Reserve int64
	// Logger gets the server's warnings and errors and the store's
	// recoveries (nil: nothing is logged).
	Logger *slog.Logger
	// RecoverEvery is how often a store with a write error is looked at
	// (0: every 2 s).
	RecoverEvery time.Duration
}

// DefaultReserve is the free space a full store waits for before it is
// restarted.
const DefaultReserve = 64 << 20

// PortInUseError is a port of the embedded server that something else
// listens on. Port is "client" or "monitoring".
type PortInUseError struct {
	Port string
	Addr string
	Err  error
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("the embedded NATS server's %s port %s is in use by another program", e.Port, e.Addr)
}

func (e *PortInUseError) Unwrap() error { return e.Err }

// Embedded is an in-process NATS server with JetStream. After a store
// write error (a full disk) it is restarted whole, on the same ports and
// store, once the store's file system has room again: its clients
// reconnect and go on. (JetStream alone restarted in a running server
// races with the API requests its clients send meanwhile.)
type Embedded struct {
	opts *server.Options // as the first server ran, its ports fixed
	url  string
	sl   *serverLog
	log  *slog.Logger

	mu      sync.Mutex
	ns      *server.Server
	stopped chan struct{}
	stop    sync.Once
}

// ClientURL is the URL clients connect to; a restart keeps it.
func (e *Embedded) ClientURL() string { return e.url }

// StoreDir is the JetStream store's directory.
func (e *Embedded) StoreDir() string { return e.server().StoreDir() }

// Shutdown stops the server (and any restart to come) and waits for it.
func (e *Embedded) Shutdown() {
	e.stop.Do(func() { close(e.stopped) })
	e.mu.Lock()
	ns := e.ns
	e.mu.Unlock()
	ns.Shutdown()
	ns.WaitForShutdown()
}

// WaitForShutdown waits until Shutdown was called and the server stopped.
func (e *Embedded) WaitForShutdown() {
	<-e.stopped
	e.server().WaitForShutdown()
}

// Interest reports whether the server has a subscriber for subject, in
// the account its clients use (the embedded server has no others): a
// look in the account's subject tree, where a message would cost its
// client a write and the server a read, a parse and the same look. A
// subscription that arrives meanwhile is as good as one that arrives
// just after the message, which it would not get either.
func (e *Embedded) Interest(subject string) bool {
	acc := e.server().GlobalAccount()
	return acc == nil || acc.SubscriptionInterest(subject)
}

func (e *Embedded) server() *server.Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ns
}

// StartEmbedded starts a NATS server with JetStream in this process and
// waits until it accepts connections. Its ports are tried first: a port
// in use is a *PortInUseError at once, where the server would only fail
// to become ready.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	opts := &server.Options{
		ServerName: "toolruntime-embedded",
		Host:       o.Host,
		Port:       o.Port,
		HTTPHost:   o.Host,
		HTTPPort:   o.HTTPPort,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		NoSigs:     true,
		// A worker's subjects are new at almost every message (a turn's
		// id, a call's key, a reply's id, an acknowledgement's sequence):
		// a cached match is seldom found again, and filling and pruning
		// the cache cost more than the matches it serves.
		NoSublistCache: true,

		JetStreamMaxStore: o.MaxStore,
	}
	if opts.Host == "" {
		opts.Host, opts.HTTPHost = "127.0.0.1", "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = 4222
	}
	if opts.HTTPPort == 0 {
		opts.HTTPPort = 8222
	}
	if o.NoMonitoring {
		opts.HTTPPort = 0
	}
	if err := portFree("client", opts.Host, opts.Port); err != nil {
		return nil, err
	}
	if opts.HTTPPort > 0 {
		if err := portFree("monitoring", opts.HTTPHost, opts.HTTPPort); err != nil {
			return nil, err
		}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Embedded{sl: &serverLog{log: log.With("component", "nats-server")}, log: log, stopped: make(chan struct{})}
	ns, err := e.start(opts.Clone())
	if err != nil {
		return nil, err
	}
	// A restart binds the ports this server got (a -1 port is one picked
	// now) and keeps its store limit (the default is figured from the
	// space free at start, which a full disk would shrink).
	if a, ok := ns.Addr().(*net.TCPAddr); ok {
		opts.Port = a.Port
	}
	if a := ns.MonitorAddr(); a != nil && opts.HTTPPort != 0 {
		opts.HTTPPort = a.Port
	}
	if c := ns.JetStreamConfig(); c != nil {
		opts.JetStreamMaxStore = c.MaxStore
	}
	e.opts, e.ns, e.url = opts, ns, ns.ClientURL()
	if opts.StoreDir != "" {
		r := &storeRecovery{e: e, dir: opts.StoreDir, reserve: o.Reserve, every: o.RecoverEvery}
		go r.run()
	}
	return e, nil
}

// start starts one server with opts and waits until it is ready.
func (e *Embedded) start(opts *server.Options) (*server.Server, error) {
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	ns.SetLoggerV2(e.sl, false, false, false)
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded NATS server did not become ready on %s:%d", opts.Host, opts.Port)
	}
	return ns, nil
}

// restart replaces the running server by a new one on the same ports and
// store, unless Shutdown came first.
func (e *Embedded) restart() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.stopped:
		return nil
	default:
	}
	e.ns.Shutdown()
	e.ns.WaitForShutdown()
	var err error
	for range 50 { // the old listener's port may take a moment to be free
		var ns *server.Server
		if ns, err = e.start(e.opts.Clone()); err == nil {
			e.ns = ns
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// serverLog passes the embedded server's warnings and errors to slog and
// notes a store write error (a full disk): the server keeps such an error
// for good in the stream (every later write of it fails, "critical write
// error", even once there is space again), or shuts JetStream down ("out
// of resources").
type serverLog struct {
	log      *slog.Logger
	writeErr atomic.Bool
}

func (l *serverLog) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLog) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *serverLog) Fatalf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLog) Debugf(string, ...any)           {}
func (l *serverLog) Tracef(string, ...any)           {}

func (l *serverLog) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if strings.Contains(msg, "critical write error") || strings.Contains(msg, "Critical write error") || strings.Contains(msg, "out of resources") || strings.Contains(msg, "resources, will be DISABLED") {
		l.writeErr.Store(true)
	}
	l.log.Error(msg)
}

// storeRecovery restarts the server (its streams, consumers and buckets
// are read back from the store) once the store had a write error and its
// file system has Reserve bytes free again: the worker's steps then go
// on by themselves, with nothing stored lost.
type storeRecovery struct {
	e       *Embedded
	dir     string
	reserve int64
	every   time.Duration
}

func (r *storeRecovery) run() {
	if r.reserve <= 0 {
		r.reserve = DefaultReserve
	}
	if r.every <= 0 {
		r.every = 2 * time.Second
	}
	log, sl := r.e.log, r.e.sl
	t := time.NewTicker(r.every)
	defer t.Stop()
	waiting := false
	for {
		select {
		case <-r.e.stopped:
			return
		case <-t.C:
		}
		if !sl.writeErr.Load() && r.e.server().JetStreamEnabled() {
			continue
		}
		free, err := freeBytes(r.dir)
		if err != nil || free < r.reserve {
			if !waiting {
				log.Warn("the JetStream store could not write (its disk is full?); it restarts once its file system has room",
					"store_dir", r.dir, "free_bytes", free, "reserve_bytes", r.reserve, "err", err)
				waiting = true
			}
			continue
		}
		sl.writeErr.Store(false)
		if err := r.e.restart(); err != nil {
			log.Error("restarting the NATS server after a store write error failed; trying again", "store_dir", r.dir, "err", err)
			sl.writeErr.Store(true)
			continue
		}
		waiting = false
		log.Info("the NATS server restarted after a store write error; its file system has room again", "store_dir", r.dir, "free_bytes", free)
	}
}

// freeBytes is the space dir's file system gives an unprivileged writer.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert // uint32 on darwin
}

// portFree listens on host:port and lets go: what the server would do
// first, with an error that names the port. A port of -1 (any free one)
// is not tried.
func portFree(name, host string, port int) error {
	if port < 0 {
		return nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return &PortInUseError{Port: name, Addr: addr, Err: err}
		}
		return fmt.Errorf("embedded NATS server: %s port %s: %w", name, addr, err)
	}
	return ln.Close()
}
