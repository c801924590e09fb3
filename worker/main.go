package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/category/skills"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natsconn"
	"github.com/agentbull/toolruntime/internal/procguard"
	"github.com/agentbull/toolruntime/internal/telemetry"
	"github.com/agentbull/toolruntime/tool"
)

// secretEnv are the variables that may hold NATS credentials (a URL may
// carry user:password@), as the worker's own and as the NATS CLI's names:
// forgotten once read, see internal/procguard.
var secretEnv = []string{
	"WORKER_USER", "WORKER_PASSWORD", "WORKER_TOKEN", "WORKER_NKEY", "WORKER_CREDS", "WORKER_TLS_KEY", "WORKER_NATS_URL",
	"NATS_URL", "NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_NKEY", "NATS_CREDS", "NATS_KEY",
}

// run is Main but for the exit: it returns the exit code.
func run(ctx context.Context, cfg Config, categories []tool.Category, args []string) int {
	// Before any child: descriptors the worker's parent left open reach
	// no command or MCP server (logged once the logger exists).
	fdErr := procguard.CloseOnExec()
	procguard.Init(secretEnv...) // returns at once unless PID 1
	// Notify also takes back a SIGINT the process was started ignoring (a
	// script's &), and the handler stays for the second signal: stopping
	// it would give the signal back to being ignored.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	m := newProgram(cfg, categories...)
	if err := m.ParseFlags(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return usage(err)
	}
	if err := procguard.Harden(secretEnv...); err != nil {
		m.log.Warn("the process is not fully hardened", "err", err)
	}
	if fdErr != nil {
		m.log.Warn("inherited descriptors may reach commands and MCP servers", "err", fdErr)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(m.GCPercent)
	}
	// The worker stops only once the stop is announced, so that the
	// message comes before the worker's own "stopped".
	runCtx, cancelRun := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-sigs:
		case <-ran:
			return
		}
		m.log.Info(m.stopping())
		cancelRun()
		select {
		case sig := <-sigs: // a second signal ends the process at once
			m.log.Warn("second signal: quitting at once; unfinished steps are delivered again", "signal", sig.String())
			os.Exit(128 + int(sig.(syscall.Signal)))
		case <-ran:
		}
	}()
	err := m.Run(runCtx)
	close(ran)
	cancelRun()
	m.Close()
	var fe *flagError
	if errors.As(err, &fe) {
		return usage(fe)
	}
	if err != nil {
		m.log.Error("worker failed", "err", err)
		return 1
	}
	return 0
}

// usage prints a wrong setting as one line and a pointer to --help, and
// returns the exit code 2. A program of one's own (examples/custom-tool)
// says its own name.
func usage(err error) int {
	name := filepath.Base(os.Args[0])
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	fmt.Fprintf(os.Stderr, "Run %s --help for the flags.\n", name)
	return 2
}

// program is the worker program: its configuration, by section (each
// section registers its flags: flags.go), and what it started.
type program struct {
	// Conn are the connection flags (--nats-url, --context, --user, …).
	Conn natsconn.Flags
	serverConfig
	telemetryConfig
	// Worker is the engine's configuration (its flags are
	// engine.Config.RegisterFlags); Storage and Approval are the
	// --storage and --approval strings read into its Topology.Storage and
	// Approval.
	Worker   engine.Config
	Storage  string
	Approval string
	builtinConfig

	// cfgErr is what Config.engine said of the program's Config.
	cfgErr error
	mcp    *mcp.Config
	skills *skills.Library
	log    *slog.Logger
	server *bus.Embedded
	nc     *nats.Conn

	// unlock releases the embedded store's lock, or removes the store of
	// a run that keeps nothing; tel is set once telemetry runs (the signal
	// handler reads it).
	unlock func()
	tel    atomic.Pointer[telemetry.Telemetry]
	// helpOut is where --help writes (default stdout).
	helpOut io.Writer
	// From Main: the version, and the program's own categories.
	version    string
	categories []tool.Category
}

// newProgram returns a program for cfg and categories, its flags not yet
// parsed.
func newProgram(cfg Config, categories ...tool.Category) *program {
	m := &program{log: slog.Default(), categories: categories}
	m.cfgErr = cfg.toEngine(&m.Worker)
	m.version = m.Worker.Version
	if cfg.MemoryStorage {
		m.Storage = "memory"
	}
	return m
}

// stdout is where --help writes.
func (m *program) stdout() io.Writer {
	if m.helpOut != nil {
		return m.helpOut
	}
	return os.Stdout
}

// Run connects (starting the embedded server first when no URL is set),
// and serves until ctx ends.
func (m *program) Run(ctx context.Context) error {
	url := m.Conn.URL
	if url == "" {
		host, port, err := splitHostPort(m.Listen)
		if err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
		dir, release, err := m.storeDir()
		if err != nil {
			return err
		}
		m.unlock = release
		eo := bus.EmbeddedOptions{Host: host, Port: port, HTTPPort: m.MonitorPort, StoreDir: dir, NoMonitoring: m.MonitorPort == 0,
			MaxStore: m.StoreMax, Logger: m.log}
		if m.server, err = bus.StartEmbedded(eo); err != nil {
			return portHint(err)
		}
		url = m.server.ClientURL()
		m.Worker.Interest = m.server.Interest
		m.log.Info("embedded NATS server with JetStream started", "url", url, "monitoring", m.monitorURL(host), "data_dir", dir)
		if m.Computer.StorePath == "" {
			m.Computer.StorePath = dir // the homes' reserve says whether it shares their disk
		}
		if m.Computer.Root != "" && sameFileSystem(dir, m.Computer.Root) {
			m.log.Warn("the JetStream store and the agent homes share a file system: an agent that fills it stops every agent's steps until space is freed (the store restarts by itself then); give --data-dir another file system; --home-reserve keeps its room",
				"data_dir", dir, "computer_root", m.Computer.Root)
		}
	}
	opts, err := m.natsOptions()
	if err != nil {
		return err
	}
	if m.nc, err = nats.Connect(url, opts...); err != nil {
		return fmt.Errorf("connecting to %s%s: %w", url, m.Conn.URLSource(), err)
	}
	js, err := jetstream.New(m.nc)
	if err != nil {
		return err
	}
	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	telCfg := telemetry.Config{
		Instance: m.Worker.Name, Version: m.version,
		OTLPEndpoint: m.OTLPEndpoint, OTLPFromEnv: m.otlpFromEnv, OTLPInsecure: m.OTLPInsecure, HTTPAddr: m.HTTPAddr, Profiling: m.Pprof,
	}
	tel, err := telemetry.Setup(setupCtx, telCfg, m.log)
	if err != nil {
		return err
	}
	if target := telemetry.Target(telCfg); target != "" {
		m.log.Info("spans are exported over OTLP/HTTP", "endpoint", target)
	} else {
		m.log.Info("spans are not exported (set --otlp-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT to send them to a collector)")
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Close(ctx)
	}()
	m.Worker.Telemetry = tel
	m.tel.Store(tel)
	// The SDK's own errors (a collector that refuses spans) would go to
	// the standard logger; the process has one log. This is global by the
	// SDK's design, so it is set here, in main's package.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { m.log.Warn("telemetry", "err", err) }))
	b, err := m.startBuiltins(ctx, setupCtx, js)
	if err != nil {
		return err
	}
	defer b.close()
	es, err := catalog(b, m.categories)
	if err != nil {
		return err
	}
	if err := m.checkApproval(setupCtx, es); err != nil {
		return err
	}
	w, err := start(setupCtx, m.nc, m.Worker, m.log, es, b)
	if err != nil {
		return m.storageHint(err)
	}
	return w.Run(ctx)
}

// storeDir is the embedded server's JetStream directory, held for this
// run; release gives it back once the server stopped. --storage memory
// without --data-dir keeps nothing, and so reads nothing either: the run
// gets a directory of its own, removed at the end. In the default data
// directory, the streams and buckets of a run with files would otherwise
// meet this run's memory ones, and the server refuses to change their
// storage.
func (m *program) storeDir() (dir string, release func(), err error) {
	if m.Worker.Topology.Storage == jetstream.MemoryStorage && !m.dataDirGiven {
		if dir, err = os.MkdirTemp("", dataDirName+"-jetstream-"); err != nil {
			return "", nil, fmt.Errorf("a store directory for --storage memory: %w", err)
		}
		return dir, func() { _ = os.RemoveAll(dir) }, nil
	}
	release, err = lockDataDir(m.DataDir)
	return m.DataDir, release, err
}

// stopping says what a stop waits for.
func (m *program) stopping() string {
	running := "running calls"
	if tel := m.tel.Load(); tel != nil {
		if n := tel.Metrics.Running(); n == 1 {
			running = "1 running call"
		} else {
			running = fmt.Sprintf("%d running calls", n)
		}
	}
	return fmt.Sprintf("stopping: waiting up to %s for %s to finish; press Ctrl-C again to quit at once (unfinished steps are delivered again)", m.Worker.Grace, running)
}

func (m *program) monitorURL(host string) string {
	if m.MonitorPort == 0 {
		return "off"
	}
	return fmt.Sprintf("http://%s:%d", host, m.MonitorPort)
}

func (m *program) natsOptions() ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name("toolruntime-worker " + m.Worker.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		// A connection closed on purpose is disconnected with no error:
		// that is the stop, not a warning.
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				m.log.Warn("disconnected from NATS; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { m.log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted()) }),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				m.log.Error("NATS connection closed", "err", err)
			}
		}),
		// Asynchronous errors (a permissions violation, a slow consumer)
		// reach no caller: they are logged here, or nats.go prints them.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				m.log.Error("NATS error", "subject", sub.Subject, "err", err)
				return
			}
			m.log.Error("NATS error", "err", err)
		}),
	}
	auth, err := m.Conn.Options()
	return append(opts, auth...), err
}

// Close drains the connection and stops the embedded server.
func (m *program) Close() {
	if m.nc != nil {
		_ = m.nc.Drain()
		for m.nc.IsDraining() {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if m.server != nil {
		m.server.Shutdown()
		m.server.WaitForShutdown()
	}
	if m.unlock != nil {
		m.unlock()
	}
}

// portHint adds the flags that fix a port of the embedded server in use.
func portHint(err error) error {
	var pe *bus.PortInUseError
	if !errors.As(err, &pe) {
		return err
	}
	if pe.Port == "monitoring" {
		return fmt.Errorf("%w: choose another with --monitor-port, or turn monitoring off with --monitor-port 0", err)
	}
	return fmt.Errorf("%w (another worker's embedded server?): join that server with --nats-url nats://%s, or give this one another address with --listen (and --monitor-port)", err, pe.Addr)
}

func splitHostPort(s string) (string, int, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return "", 0, fmt.Errorf("%q is not host:port", s)
	}
	var port int
	if _, err := fmt.Sscanf(s[i+1:], "%d", &port); err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("%q has no valid port", s)
	}
	return s[:i], port, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
