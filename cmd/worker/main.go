// Command worker runs the tool runtime worker. With no configuration it
// starts an embedded NATS server with JetStream on 127.0.0.1:4222
// (monitoring on 8222) and serves on it; with --nats-url (or NATS_URL) it
// joins an existing server or cluster. Every flag can also be set from the
// environment: --call-timeout is WORKER_CALL_TIMEOUT, and so on.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"golang.org/x/sync/errgroup"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/mcp"
	"github.com/agentbull/toolruntime/internal/skills"
	"github.com/agentbull/toolruntime/internal/telemetry"
	"github.com/agentbull/toolruntime/internal/tools/brain"
	"github.com/agentbull/toolruntime/internal/tools/computer"
	"github.com/agentbull/toolruntime/internal/tools/diag"
	"github.com/agentbull/toolruntime/internal/tools/jobs"
	"github.com/agentbull/toolruntime/internal/tools/schedule"
	"github.com/agentbull/toolruntime/internal/tools/todo"
	"github.com/agentbull/toolruntime/internal/tools/web"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/worker"
	"github.com/agentbull/toolruntime/internal/workflowtask"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(m.GCPercent)
	}
	go func() {
		<-ctx.Done()
		stop() // a second signal now ends the process at once
	}()
	err := m.Run(ctx)
	m.Close()
	if err != nil {
		m.log.Error("worker failed", "err", err)
		os.Exit(1)
	}
}

// Main is the program: its configuration, and what it started.
type Main struct {
	NATSURL     string
	Listen      string
	MonitorPort int
	DataDir     string
	User        string
	Password    string
	Token       string
	NKeySeed    string
	Creds       string
	TLSCert     string
	TLSKey      string
	TLSCA       string
	// Telemetry: metrics and health port, span export.
	HTTPAddr     string
	Pprof        bool
	GCPercent    int
	OTLPEndpoint string
	OTLPInsecure bool
	LogFormat    string
	LogLevel     string
	Diagnostics  bool
	MarkDir      string
	Storage      string
	Worker       worker.Config
	// The categories with state in JetStream, each on unless switched off.
	// Replicas and Storage of their buckets and streams come from Worker.
	TodoOn      bool
	Todo        todo.Config
	BrainOn     bool
	Brain       brain.Config
	SchedulesOn bool
	Schedules   schedule.Config
	JobsOn      bool
	Jobs        jobs.Config
	// The agent computer (on when ComputerRoot is set) and the web.
	OutputBudget int
	Computer     computer.Config
	CommandEnv   string
	Sandbox      commandSandbox
	Web          web.Config
	WebAllow     string
	// MCP servers and skills, each off unless its file or directory is given.
	MCPConfig string
	SkillsDir string
	mcp       *mcp.Config
	skills    *skills.Library
	log       *slog.Logger
	server    *server.Server
	nc        *nats.Conn
}

// NewMain returns a Main with defaults.
func NewMain() *Main {
	return &Main{log: slog.Default()}
}

// ParseFlags reads flags, then the environment for flags not given.
func (m *Main) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: worker [flags]\n\nRuns the tool runtime worker. Every flag may also be set from the environment\nas WORKER_<FLAG> (upper case, dashes as underscores); --nats-url also reads NATS_URL.\n\n")
		fs.PrintDefaults()
	}
	host, _ := os.Hostname()
	w := &m.Worker
	t := &w.Topology
	fs.StringVar(&m.NATSURL, "nats-url", "", "NATS server or cluster URLs (comma-separated); empty starts an embedded server")
	fs.StringVar(&m.Listen, "listen", "127.0.0.1:4222", "embedded server: client address")
	fs.IntVar(&m.MonitorPort, "monitor-port", 8222, "embedded server: monitoring port (0 turns it off)")
	fs.StringVar(&m.DataDir, "data-dir", defaultDataDir(), "embedded server: JetStream storage directory")
	fs.StringVar(&m.User, "user", "", "NATS user name")
	fs.StringVar(&m.Password, "password", "", "NATS password")
	fs.StringVar(&m.Token, "token", "", "NATS token")
	fs.StringVar(&m.NKeySeed, "nkey", "", "NATS NKey seed file")
	fs.StringVar(&m.Creds, "creds", "", "NATS credentials file (JWT and seed)")
	fs.StringVar(&m.TLSCert, "tls-cert", "", "TLS client certificate file")
	fs.StringVar(&m.TLSKey, "tls-key", "", "TLS client key file")
	fs.StringVar(&m.TLSCA, "tls-ca", "", "TLS CA certificate file")
	fs.StringVar(&m.HTTPAddr, "http-addr", "", "serve Prometheus /metrics, /healthz and /readyz on this address (e.g. 0.0.0.0:9090; empty: off)")
	fs.IntVar(&m.GCPercent, "gc-percent", 400, "Go's GC target percentage, unless GOGC is set: a worker's live heap is small, and collecting less often saves CPU on every step")
	fs.BoolVar(&m.Pprof, "pprof", false, "also serve Go's profiles under /debug/pprof/ on --http-addr")
	fs.StringVar(&m.OTLPEndpoint, "otlp-endpoint", "", "send trace spans over OTLP/HTTP to this endpoint (host:port or URL; also OTEL_EXPORTER_OTLP_ENDPOINT; empty: no export)")
	fs.BoolVar(&m.OTLPInsecure, "otlp-insecure", false, "send spans without TLS")
	fs.StringVar(&m.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&m.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&m.MCPConfig, "mcp-config", "", "JSON file naming the MCP servers turns may enable (empty: none)")
	fs.StringVar(&m.SkillsDir, "skills-dir", "", "directory of skills, one folder with a SKILL.md each (empty: none)")
	fs.BoolVar(&m.Diagnostics, "diagnostics", false, "offer the diagnostics tools (ping, sleep, finish, mark) to turns that bind \"diagnostics\"")
	fs.StringVar(&m.MarkDir, "mark-dir", "", "directory where the diagnostics tool mark appends its lines (empty: no mark tool)")
	fs.StringVar(&w.Name, "name", fmt.Sprintf("%s-%d", host, os.Getpid()), "this worker's name in logs and call claims")
	fs.IntVar(&w.Concurrency, "concurrency", 256, "main-turn steps handled at once")
	fs.IntVar(&w.TaskConcurrency, "task-concurrency", 16, "workflow task-turn steps handled at once")
	fs.DurationVar(&w.Grace, "grace", 30*time.Second, "on SIGINT/SIGTERM, how long running steps may finish")
	fs.DurationVar(&w.CallTimeout, "call-timeout", turn.DefaultTimeout, "default time limit of one call")
	fs.IntVar(&w.MaxParallel, "max-parallel", turn.DefaultMaxParallel, "parallel calls of one step running at once")
	fs.IntVar(&w.RepairLimit, "repair-limit", 1<<20, "argument size in bytes above which no repair is tried")
	fs.IntVar(&w.MaxStepBytes, "max-step-bytes", 1<<20, "largest step message processed; larger ones are dead-lettered")
	fs.IntVar(&t.Replicas, "replicas", 1, "replicas of the streams, consumers and buckets")
	fs.StringVar(&m.Storage, "storage", "file", "storage of the streams and buckets: file or memory")
	fs.DurationVar(&t.AckWait, "ack-wait", 30*time.Second, "ack wait of the work consumers (leases are renewed at a third of it)")
	fs.IntVar(&t.MaxDeliver, "max-deliver", 5, "deliveries of a step before it is dead-lettered")
	fs.IntVar(&t.MaxAckPending, "max-ack-pending", 1000, "steps out with the fleet at once, per consumer")
	fs.DurationVar(&t.DuplicateWindow, "duplicate-window", 0, "duplicate window of the streams (default: the redelivery span, at least 2m)")
	fs.DurationVar(&t.OutputsMaxAge, "outputs-max-age", 24*time.Hour, "how long TURN_OUTPUTS keeps events")
	fs.DurationVar(&t.StateTTL, "state-ttl", 24*time.Hour, "how long TURN_STATE keeps per-turn state")
	fs.BoolVar(&m.TodoOn, "todo", true, "offer todo_write and todo_read to every main turn (a context can switch them off with \"todo\": false)")
	fs.DurationVar(&m.Todo.TTL, "todo-ttl", todo.DefaultTTL, "how long TODOS keeps a turn's list after its last write")
	fs.BoolVar(&m.BrainOn, "brain", true, "offer the brain tools to turns that bind \"brain\" (task turns: recall and get_page)")
	fs.IntVar(&m.Brain.MaxPageBytes, "brain-max-page-bytes", brain.DefaultMaxPageBytes, "largest brain page")
	fs.IntVar(&m.Brain.MaxPages, "brain-max-pages", brain.DefaultMaxPages, "most brain pages of one agent")
	fs.IntVar(&m.Brain.CacheBytes, "brain-cache-bytes", brain.DefaultCacheBytes, "memory for this worker's cache of search indexes")
	fs.BoolVar(&m.SchedulesOn, "schedules", true, "offer the schedule tools to main turns that bind \"schedules\" (needs nats-server 2.12 or later)")
	fs.DurationVar(&m.Schedules.MinInterval, "schedule-min-interval", schedule.DefaultMinInterval, "shortest interval a schedule may fire at (at least 1s)")
	fs.IntVar(&m.Schedules.MaxPerAgent, "schedule-max-per-agent", schedule.DefaultMaxPerAgent, "most schedules of one agent")
	fs.DurationVar(&m.Schedules.FireTTL, "schedule-fire-ttl", schedule.DefaultFireTTL, "how long SCHEDULES keeps a fired message for the gateway")
	fs.BoolVar(&m.JobsOn, "background-jobs", true, "offer the background job tools to main turns that bind \"background_jobs\", and apply the job runner's reports")
	fs.IntVar(&m.Jobs.MaxOpen, "jobs-max-open", jobs.DefaultMaxOpen, "most queued or running jobs of one agent")
	fs.DurationVar(&m.Jobs.RecordTTL, "jobs-record-ttl", jobs.DefaultRecordTTL, "how long JOBS keeps a job after its last change")
	fs.IntVar(&m.OutputBudget, "output-budget", computer.DefaultOutputBudget, "bytes of one computer or web tool result the model reads; longer results keep their head (and tail) with a note")
	fs.StringVar(&m.Computer.Root, "computer-root", "", "directory of the agent homes (<root>/<agent_id>); set it to offer the computer tools to main turns that bind \"computer\" (empty: off)")
	fs.DurationVar(&m.Computer.CommandTimeout, "command-timeout", computer.DefaultCommandTimeout, "run_command's time limit when a call sets none")
	fs.DurationVar(&m.Computer.MaxCommandTimeout, "max-command-timeout", computer.DefaultMaxCommandTimeout, "longest time limit a run_command call may ask for")
	fs.Int64Var(&m.Computer.MaxLogBytes, "command-log-bytes", computer.DefaultMaxLogBytes, "output of one command kept in the home's .outputs directory")
	fs.StringVar(&m.Computer.Path, "command-path", computer.DefaultPath, "PATH of commands")
	fs.StringVar(&m.CommandEnv, "command-env", "", "more environment for commands: KEY=value pairs, comma-separated (nothing of the worker's own environment reaches them)")
	m.Sandbox.flags(fs)
	fs.BoolVar(&m.Web.Fetch, "web-fetch", false, "offer web_fetch to turns that bind \"web\"")
	fs.StringVar(&m.Web.SearchURL, "web-search-url", "", "base URL of a SearXNG instance with its JSON API on; offers web_search to turns that bind \"web\" (empty: no web_search)")
	fs.StringVar(&m.WebAllow, "web-allow", "", "comma-separated ranges, addresses, host names or *.domains (each optionally :port) web_fetch may reach although they are not public")
	fs.DurationVar(&m.Web.Timeout, "web-timeout", web.DefaultTimeout, "time limit of one fetch or search")
	fs.Int64Var(&m.Web.MaxBytes, "web-max-bytes", web.DefaultMaxBytes, "body bytes web_fetch reads from one page")
	fs.IntVar(&m.Web.MaxRedirects, "web-max-redirects", web.DefaultMaxRedirects, "redirects one fetch follows (negative: none)")
	fs.StringVar(&m.Web.UserAgent, "web-user-agent", web.DefaultUserAgent, "User-Agent of fetches and searches")
	fs.DurationVar(&m.Jobs.EventsMaxAge, "jobs-events-max-age", jobs.DefaultEventsMaxAge, "how long JOB_EVENTS keeps announcements, cancels and reports")
	fs.IntVar(&m.Jobs.MaxResultBytes, "jobs-max-result-bytes", jobs.DefaultMaxResultBytes, "largest job result kept (longer ones are clipped)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		env := "WORKER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := os.LookupEnv(env)
		if !ok && f.Name == "nats-url" {
			v, ok = os.LookupEnv("NATS_URL")
		}
		if !ok && f.Name == "otlp-endpoint" {
			v, ok = os.LookupEnv("OTEL_EXPORTER_OTLP_ENDPOINT")
		}
		if ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v", env, v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	w.Version = version
	return m.validate()
}

func (m *Main) validate() error {
	var errs []error
	switch m.Storage {
	case "file":
		m.Worker.Topology.Storage = jetstream.FileStorage
	case "memory":
		m.Worker.Topology.Storage = jetstream.MemoryStorage
	default:
		errs = append(errs, fmt.Errorf("--storage must be file or memory, not %q", m.Storage))
	}
	level := new(slog.LevelVar)
	if err := level.UnmarshalText([]byte(m.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %v", err))
	}
	opts := &slog.HandlerOptions{Level: level}
	switch m.LogFormat {
	case "text":
		m.log = slog.New(slog.NewTextHandler(os.Stderr, opts))
	case "json":
		m.log = slog.New(slog.NewJSONHandler(os.Stderr, opts))
	default:
		errs = append(errs, fmt.Errorf("--log-format must be text or json, not %q", m.LogFormat))
	}
	if (m.TLSCert == "") != (m.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	if (m.User == "") != (m.Password == "") {
		errs = append(errs, errors.New("--user and --password go together"))
	}
	if m.MarkDir != "" && !m.Diagnostics {
		errs = append(errs, errors.New("--mark-dir needs --diagnostics"))
	}
	if m.GCPercent < 1 {
		errs = append(errs, fmt.Errorf("--gc-percent must be at least 1, not %d", m.GCPercent))
	}
	if m.Pprof && m.HTTPAddr == "" {
		errs = append(errs, errors.New("--pprof needs --http-addr"))
	}
	if m.MCPConfig != "" {
		cfg, err := mcp.LoadConfig(m.MCPConfig)
		if err != nil {
			errs = append(errs, fmt.Errorf("--mcp-config: %w", err))
		}
		m.mcp = &cfg
	}
	if m.SkillsDir != "" {
		lib, err := skills.Load(m.SkillsDir)
		if err != nil {
			errs = append(errs, fmt.Errorf("--skills-dir: %w", err))
		}
		m.skills = lib
	}
	if m.OutputBudget < computer.MinOutputBudget {
		errs = append(errs, fmt.Errorf("--output-budget must be at least %d", computer.MinOutputBudget))
	}
	m.Computer.OutputBudget, m.Web.OutputBudget = m.OutputBudget, m.OutputBudget
	m.Computer.Env, m.Web.Allow = splitList(m.CommandEnv), splitList(m.WebAllow)
	if m.Todo.TTL < time.Second {
		errs = append(errs, fmt.Errorf("--todo-ttl must be at least 1s, not %s", m.Todo.TTL))
	}
	if m.Brain.MaxPageBytes < 1 || m.Brain.MaxPages < 1 || m.Brain.CacheBytes < 1 {
		errs = append(errs, errors.New("--brain-max-page-bytes, --brain-max-pages and --brain-cache-bytes must be at least 1"))
	}
	if m.Schedules.MinInterval < schedule.ServerMinInterval || m.Schedules.FireTTL < time.Second || m.Schedules.MaxPerAgent < 1 {
		errs = append(errs, errors.New("--schedule-min-interval and --schedule-fire-ttl must be at least 1s, --schedule-max-per-agent at least 1"))
	}
	if m.Jobs.MaxOpen < 1 || m.Jobs.MaxResultBytes < 1 || m.Jobs.RecordTTL < time.Second || m.Jobs.EventsMaxAge < time.Second {
		errs = append(errs, errors.New("--jobs-max-open and --jobs-max-result-bytes must be at least 1, --jobs-record-ttl and --jobs-events-max-age at least 1s"))
	}
	if m.MonitorPort < 0 || m.MonitorPort > 65535 {
		errs = append(errs, fmt.Errorf("--monitor-port %d is not a port", m.MonitorPort))
	}
	if err := m.Sandbox.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := m.Worker.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run connects (starting the embedded server first when no URL is set),
// and serves until ctx ends.
func (m *Main) Run(ctx context.Context) error {
	url := m.NATSURL
	if url == "" {
		host, port, err := splitHostPort(m.Listen)
		if err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
		eo := bus.EmbeddedOptions{Host: host, Port: port, HTTPPort: m.MonitorPort, StoreDir: m.DataDir, NoMonitoring: m.MonitorPort == 0}
		if m.server, err = bus.StartEmbedded(eo); err != nil {
			return err
		}
		url = m.server.ClientURL()
		m.log.Info("embedded NATS server with JetStream started", "url", url, "monitoring", m.monitorURL(host), "data_dir", m.DataDir)
	}
	opts, err := m.natsOptions()
	if err != nil {
		return err
	}
	if m.nc, err = nats.Connect(url, opts...); err != nil {
		return fmt.Errorf("connecting to %s: %w", url, err)
	}
	js, err := jetstream.New(m.nc)
	if err != nil {
		return err
	}
	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tel, err := telemetry.Setup(setupCtx, telemetry.Config{
		Instance: m.Worker.Name, Version: version,
		OTLPEndpoint: m.OTLPEndpoint, OTLPInsecure: m.OTLPInsecure, HTTPAddr: m.HTTPAddr, Profiling: m.Pprof,
	}, m.log)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Close(ctx)
	}()
	m.Worker.Telemetry = tel
	// Catalog order: todo, computer, web, brain, schedules, background
	// jobs, workflow tools, then diagnostics. Each category creates or updates its own
	// bucket or stream here.
	topo := m.Worker.Topology.WithDefaults()
	var creators []turn.Creator
	if m.TodoOn {
		m.Todo.Replicas, m.Todo.Storage = topo.Replicas, topo.Storage
		td, err := todo.New(setupCtx, js, m.Todo)
		if err != nil {
			return err
		}
		creators = append(creators, td.Creator())
	}
	if m.Computer.Root != "" {
		sb, err := m.Sandbox.start(ctx, m.log, m.WebAllow)
		if err != nil {
			return err
		}
		if sb != nil {
			defer sb.Close()
		}
		m.Computer.Sandbox, m.Computer.Unconfined = sb, m.Sandbox.Mode == "none"
		cc, err := computer.New(m.Computer)
		if err != nil {
			return err
		}
		defer cc.Close()
		creators = append(creators, cc.Creator())
		m.log.Info("computer tools on", "homes", cc.Root())
	}
	var webTools turn.Creator
	if m.Web.Fetch || m.Web.SearchURL != "" {
		wc, err := web.New(m.Web)
		if err != nil {
			return err
		}
		defer wc.Close()
		webTools = wc.Creator()
		creators = append(creators, webTools)
	}
	var brainTools turn.Creator
	if m.BrainOn {
		m.Brain.Replicas, m.Brain.Storage = topo.Replicas, topo.Storage
		br, err := brain.New(setupCtx, js, m.Brain)
		if err != nil {
			return err
		}
		brainTools = br.Creator()
		creators = append(creators, brainTools)
	}
	if m.SchedulesOn {
		m.Schedules.Replicas, m.Schedules.Storage = topo.Replicas, topo.Storage
		sc, err := schedule.New(setupCtx, js, m.Schedules)
		if err != nil {
			return err
		}
		creators = append(creators, sc.Creator())
	}
	var jobService *jobs.Service
	if m.JobsOn {
		m.Jobs.Replicas, m.Jobs.Storage, m.Jobs.Logger = topo.Replicas, topo.Storage, m.log
		if jobService, err = jobs.New(setupCtx, js, m.Jobs); err != nil {
			return err
		}
		creators = append(creators, jobService.Creator())
	}
	workflows := workflowtask.New(js, workflowtask.Config{Web: webTools, Brain: brainTools, Logger: m.log})
	creators = append(creators, workflows.Creator())
	// Skills, then MCP servers (those the turn names and those its skills
	// need): their namespaces come late, so the catalog's prefix is stable.
	if m.skills != nil {
		creators = append(creators, skills.Creator(m.skills))
		m.log.Info("skills loaded", "dir", m.SkillsDir, "skills", m.skills.Names())
	}
	if m.mcp != nil {
		mm, err := mcp.NewManager(*m.mcp, mcp.Options{Logger: m.log, Version: version})
		if err != nil {
			return err
		}
		// Runs after the worker stopped: running calls had their grace;
		// then every session ends and every stdio server is reaped.
		defer mm.Close()
		creators = append(creators, mcp.Creator(mm, m.skills))
		m.log.Info("mcp servers configured", "servers", mm.Servers())
	}
	if m.Diagnostics {
		creators = append(creators, diag.Creator(diag.Config{MarkDir: m.MarkDir}))
	}
	w, err := worker.New(setupCtx, m.nc, m.Worker, turn.NewAssembler(creators...), workflows, m.log)
	if err != nil {
		return err
	}
	m.log.Info("connected", "url", m.nc.ConnectedUrlRedacted(), "server", m.nc.ConnectedServerName())
	// The job report watcher lives and ends with the worker.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.Run(gctx) })
	if jobService != nil {
		g.Go(func() error { return jobService.Watch(gctx) })
	}
	return g.Wait()
}

func (m *Main) monitorURL(host string) string {
	if m.MonitorPort == 0 {
		return "off"
	}
	return fmt.Sprintf("http://%s:%d", host, m.MonitorPort)
}

func (m *Main) natsOptions() ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name("turn-worker " + m.Worker.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { m.log.Warn("disconnected from NATS", "err", err) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { m.log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted()) }),
	}
	if m.User != "" {
		opts = append(opts, nats.UserInfo(m.User, m.Password))
	}
	if m.Token != "" {
		opts = append(opts, nats.Token(m.Token))
	}
	if m.NKeySeed != "" {
		o, err := nats.NkeyOptionFromSeed(m.NKeySeed)
		if err != nil {
			return nil, fmt.Errorf("--nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if m.Creds != "" {
		opts = append(opts, nats.UserCredentials(m.Creds))
	}
	if m.TLSCert != "" {
		opts = append(opts, nats.ClientCert(m.TLSCert, m.TLSKey))
	}
	if m.TLSCA != "" {
		opts = append(opts, nats.RootCAs(m.TLSCA))
	}
	return opts, nil
}

// Close drains the connection and stops the embedded server.
func (m *Main) Close() {
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
}

func defaultDataDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "turn-worker", "jetstream")
	}
	return filepath.Join(os.TempDir(), "turn-worker", "jetstream")
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
