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
	icatalog "github.com/agentbull/toolruntime/internal/catalog"
	"github.com/agentbull/toolruntime/internal/category/brain"
	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/category/jobs"
	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/category/schedule"
	"github.com/agentbull/toolruntime/internal/category/skills"
	"github.com/agentbull/toolruntime/internal/category/todo"
	"github.com/agentbull/toolruntime/internal/category/web"
	"github.com/agentbull/toolruntime/internal/media"
	"github.com/agentbull/toolruntime/internal/natsconn"
	"github.com/agentbull/toolruntime/internal/procguard"
	"github.com/agentbull/toolruntime/internal/telemetry"
	"github.com/agentbull/toolruntime/internal/turn"
	iworker "github.com/agentbull/toolruntime/internal/worker"
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
func run(ctx context.Context, o Options) int {
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
	m := newProgram(o)
	args := o.Args
	if args == nil {
		args = os.Args[1:]
	}
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

// program is the worker program: its configuration, and what it started.
type program struct {
	// Conn are the connection flags (--nats-url, --context, --user, …).
	Conn        natsconn.Flags
	Listen      string
	MonitorPort int
	DataDir     string
	StoreMax    int64
	// Telemetry: metrics and health port, span export.
	HTTPAddr     string
	Pprof        bool
	GCPercent    int
	OTLPEndpoint string
	OTLPInsecure bool
	otlpFromEnv  bool
	LogFormat    string
	LogLevel     string
	Diagnostics  bool
	MarkDir      string
	Storage      string
	Worker       iworker.Config
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
	// MCPBounds bound each MCP server's tool listing (--mcp-list-*).
	MCPBounds mcp.Options
	SkillsDir string
	// Approval is the --approval policy, read into Worker.Approval.
	Approval string
	mcp      *mcp.Config
	skills   *skills.Library
	log      *slog.Logger
	server   *bus.Embedded
	nc       *nats.Conn

	// unlock releases the embedded store's lock; tel is set once
	// telemetry runs (the signal handler reads it).
	unlock func()
	tel    atomic.Pointer[telemetry.Telemetry]
	// helpOut is where --help writes (default stdout).
	helpOut io.Writer
	// From Options: the version, and the program's own categories.
	version    string
	categories []tool.Category
}

// newProgram returns a program with defaults, for o.
func newProgram(o Options) *program {
	m := &program{log: slog.Default(), version: strings.TrimPrefix(o.Version, "v"), categories: o.Categories}
	if o.Version == "" {
		m.version = DefaultVersion
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

// ParseFlags reads flags, then the environment for flags not given.
func (m *program) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	// A mistyped flag is its error and a pointer to --help (main prints
	// them), not the whole usage burying the one line that matters; the
	// usage goes to stdout when asked for.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	host, _ := os.Hostname()
	w := &m.Worker
	t := &w.Topology
	m.Conn.Register(fs, "NATS server or cluster URLs (comma-separated); empty starts an embedded server")
	fs.StringVar(&m.Listen, "listen", "127.0.0.1:4222", "embedded server: client address")
	fs.IntVar(&m.MonitorPort, "monitor-port", 8222, "embedded server: monitoring port (0 turns it off)")
	fs.StringVar(&m.DataDir, "data-dir", defaultDataDir(), "embedded server: JetStream storage directory")
	fs.Int64Var(&m.StoreMax, "store-max-bytes", 0, "embedded server: most bytes the JetStream store may use (0: 75% of the space free in --data-dir at start)")
	fs.StringVar(&m.HTTPAddr, "http-addr", "", "serve Prometheus /metrics, /healthz and /readyz on this address (e.g. 0.0.0.0:9090; empty: off)")
	fs.IntVar(&m.GCPercent, "gc-percent", 400, "Go's GC target percentage, unless GOGC is set: a worker's live heap is small, and collecting less often saves CPU on every step")
	fs.BoolVar(&m.Pprof, "pprof", false, "also serve Go's profiles under /debug/pprof/ on --http-addr")
	fs.StringVar(&m.OTLPEndpoint, "otlp-endpoint", "", "send trace spans over OTLP/HTTP to this collector (host:port or URL; /v1/traces is added to a URL without a path; empty: where OTEL_EXPORTER_OTLP_ENDPOINT says, else no export)")
	fs.BoolVar(&m.OTLPInsecure, "otlp-insecure", false, "send spans without TLS")
	fs.StringVar(&m.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&m.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&m.MCPConfig, "mcp-config", "", "JSON file naming the MCP servers turns may enable (empty: none)")
	fs.IntVar(&m.MCPBounds.MaxListPages, "mcp-list-pages", mcp.DefaultMaxListPages, "most pages of one MCP server's tools/list read; past a bound the listing keeps the tools that fit and the model is told")
	fs.IntVar(&m.MCPBounds.MaxListTools, "mcp-list-tools", mcp.DefaultMaxListTools, "most tools taken of one MCP server")
	fs.IntVar(&m.MCPBounds.MaxListBytes, "mcp-list-bytes", mcp.DefaultMaxListBytes, "most bytes of tool definitions (JSON) taken of one MCP server")
	fs.DurationVar(&m.MCPBounds.ListTimeout, "mcp-list-timeout", mcp.DefaultListTimeout, "longest one MCP server's tools/list may take")
	fs.Int64Var(&m.MCPBounds.Limits.MemoryBytes, "mcp-memory", mcp.DefaultServerMemory, "all the memory one MCP stdio server and what it starts may hold, in bytes (the memory limit of its own cgroup; beyond it the kernel kills the server and the call is told)")
	fs.IntVar(&m.MCPBounds.Limits.Pids, "mcp-pids", mcp.DefaultServerPids, "processes and threads of one MCP stdio server's cgroup at once (pids.max)")
	fs.Float64Var(&m.MCPBounds.Limits.CPU, "mcp-cpu", mcp.DefaultServerCPU, "CPU of one MCP stdio server's cgroup, in cores (cpu.max)")
	fs.StringVar(&m.Approval, "approval", "none", "calls of main turns that wait for a person's approval: none, destructive, all, or a comma-separated list of tool names and namespace.* (an MCP config's \"approval\" adds to it)")
	fs.DurationVar(&w.Approval.Timeout, "approval-timeout", turn.DefaultApprovalTimeout, "how long a step waits for approval before its calls are answered rejected (shorter than --state-ttl)")
	fs.StringVar(&m.SkillsDir, "skills-dir", "", "directory of skills, one folder with a SKILL.md each (empty: none)")
	fs.BoolVar(&m.Diagnostics, "diagnostics", false, "offer the diagnostics tools (ping, sleep, finish, mark) to turns that bind \"diagnostics\"")
	fs.StringVar(&m.MarkDir, "mark-dir", "", "directory where the diagnostics tool mark appends its lines (empty: no mark tool)")
	fs.StringVar(&w.Name, "name", fmt.Sprintf("%s-%d", host, os.Getpid()), "this worker's name in logs and call claims")
	fs.IntVar(&w.Concurrency, "concurrency", 256, "main-turn steps handled at once")
	fs.IntVar(&w.TaskConcurrency, "task-concurrency", 16, "workflow task-turn steps handled at once")
	fs.IntVar(&w.Catalog.PerKey, "catalog-per-key", icatalog.DefaultPerKey, "turn.tools requests of one fairness key (else agent) built at once; more wait, up to 256 a key, then are refused with 503")
	fs.IntVar(&w.Catalog.Total, "catalog-concurrency", icatalog.DefaultTotal, "turn.tools requests built at once, all keys together")
	// Fair share (protocol 1.2): what one fairness key may hold at once.
	fs.IntVar(&w.KeySteps, "key-steps", 0, "main-turn steps one fairness key may have running on this worker (0: 7/8 of --concurrency; the rest is kept for other keys)")
	fs.IntVar(&w.KeyTaskSteps, "key-task-steps", 0, "task-turn steps one fairness key may have running on this worker (0: 7/8 of --task-concurrency)")
	fs.IntVar(&w.HoldSteps, "hold-steps", 0, "main-turn steps the intake keeps queued on this worker, unacknowledged, for their key's turn before it moves more to TURN_BACKLOG (0: 128 x --concurrency; one key at most 7/8)")
	fs.IntVar(&w.HoldBytes, "hold-bytes", 0, "bytes of those steps, per work stream (0: 64 MiB; one key at most 7/8)")
	fs.DurationVar(&w.Grace, "grace", 30*time.Second, "on SIGINT/SIGTERM, how long running steps may finish")
	fs.DurationVar(&w.CallTimeout, "call-timeout", turn.DefaultTimeout, "default time limit of one call")
	fs.IntVar(&w.MaxParallel, "max-parallel", turn.DefaultMaxParallel, "parallel calls of one step running at once")
	fs.IntVar(&w.RepairLimit, "repair-limit", 1<<20, "argument size in bytes above which no repair is tried")
	fs.IntVar(&w.MediaBudget, "media-budget", media.DefaultBudget, "bytes of images and PDFs (as base64 data URLs) one call's output may hold, at most half the server's max payload; larger images are scaled down, other media replaced by a note")
	fs.IntVar(&w.MaxStepBytes, "max-step-bytes", 1<<20, "largest step message processed; larger ones are dead-lettered")
	fs.IntVar(&t.Replicas, "replicas", 1, "replicas of the streams, consumers and buckets")
	fs.StringVar(&m.Storage, "storage", "file", "storage of the streams and buckets: file or memory")
	fs.DurationVar(&t.AckWait, "ack-wait", 30*time.Second, "ack wait of the work consumers (leases are renewed at a third of it)")
	fs.IntVar(&t.MaxDeliver, "max-deliver", 5, "deliveries of a step before it is dead-lettered")
	fs.IntVar(&t.MaxAckPending, "max-ack-pending", 1<<16, "steps out with the fleet at once, per consumer (running, and held by the workers' intakes: keep it above the workers' --hold-steps summed)")
	fs.DurationVar(&t.DuplicateWindow, "duplicate-window", 0, "duplicate window of the streams (default: the redelivery span, at least 2m)")
	fs.DurationVar(&t.OutputsMaxAge, "outputs-max-age", 24*time.Hour, "how long TURN_OUTPUTS keeps events")
	fs.DurationVar(&t.StateTTL, "state-ttl", 25*time.Hour, "how long TURN_STATE keeps per-turn state (steps pending approval included)")
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
	fs.Int64Var(&m.Computer.MaxFileBytes, "file-max-bytes", computer.DefaultMaxFileBytes, "largest content write_file writes and largest file edit_file reads or makes (read_file returns at most --output-budget per call)")
	fs.Int64Var(&m.Computer.HomeQuotaBytes, "home-quota", computer.DefaultHomeQuotaBytes, "bytes on disk each agent home may hold; a write or command over it is refused or stopped (-1: no bound)")
	fs.Int64Var(&m.Computer.HomeQuotaFiles, "home-files", computer.DefaultHomeQuotaFiles, "files, directories and links each agent home may hold (-1: no bound)")
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
	var badValue error
	friendly(fs, &badValue)
	if err := fs.Parse(args); err != nil {
		if badValue != nil {
			return badValue
		}
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(m.stdout())
			fmt.Fprintf(fs.Output(), "Usage: worker [flags]\n\nRuns the tool runtime worker. Every flag may also be set from the environment\nas WORKER_<FLAG> (upper case, dashes as underscores); the connection flags also\nread the NATS CLI's variables (NATS_URL, NATS_CONTEXT, NATS_USER, NATS_PASSWORD,\nNATS_TOKEN, NATS_CREDS, NATS_NKEY, NATS_CERT, NATS_KEY, NATS_CA).\n\n")
			fs.PrintDefaults()
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := natsconn.FromEnv(fs, set, "WORKER", os.LookupEnv); err != nil {
		return err
	}
	if err := m.Conn.Resolve(set, os.LookupEnv); err != nil {
		return err
	}
	// The exporter reads the OTEL_EXPORTER_OTLP_* variables itself; they
	// are looked at here, with every other variable, so that the
	// environment can be cleaned once the flags are parsed.
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if os.Getenv(v) != "" {
			m.otlpFromEnv = true
		}
	}
	w.Version = m.version
	return m.validate()
}

func (m *program) validate() error {
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
	if (m.Conn.TLSCert == "") != (m.Conn.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	if (m.Conn.User == "") != (m.Conn.Password == "") {
		errs = append(errs, errors.New("--user and --password go together"))
	}
	if m.MarkDir != "" && !m.Diagnostics {
		errs = append(errs, errors.New("--mark-dir needs --diagnostics"))
	}
	if !semVer.MatchString(m.version) {
		errs = append(errs, fmt.Errorf("the program's version %q is not SemVer (worker.Options.Version, or -X main.version)", m.version))
	}
	if m.GCPercent < 1 {
		errs = append(errs, fmt.Errorf("--gc-percent must be at least 1, not %d", m.GCPercent))
	}
	if m.Pprof && m.HTTPAddr == "" {
		errs = append(errs, errors.New("--pprof needs --http-addr"))
	}
	if m.Conn.URL == "" {
		if _, _, err := splitHostPort(m.Listen); err != nil {
			errs = append(errs, fmt.Errorf("--listen: %w", err))
		}
	}
	if m.OTLPEndpoint != "" {
		if err := telemetry.CheckEndpoint(m.OTLPEndpoint, false); err != nil {
			errs = append(errs, fmt.Errorf("--otlp-endpoint: %w (give host:port or an http:// or https:// URL)", err))
		}
	} else {
		for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
			if ep := os.Getenv(v); ep != "" {
				if err := telemetry.CheckEndpoint(ep, true); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w (or set --otlp-endpoint, which takes precedence)", v, err))
				}
				break
			}
		}
	}
	if m.MCPConfig != "" {
		cfg, err := mcp.LoadConfig(m.MCPConfig)
		if err != nil {
			errs = append(errs, fmt.Errorf("--mcp-config: %w", err))
		}
		m.mcp = &cfg
	}
	policy, err := turn.ParsePolicy(m.Approval)
	if err != nil {
		errs = append(errs, fmt.Errorf("--approval: %w", err))
	}
	if m.mcp != nil {
		policy.Names = append(policy.Names, m.mcp.ApprovalNames()...)
	}
	policy.Timeout = m.Worker.Approval.Timeout
	m.Worker.Approval = policy
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
	// Zero is refused like a negative: the library reads it as "the
	// default", which on the command line would be a silent surprise
	// (leave the flag out for the default). A negative is named here with
	// its flag, before the library's own check words it as a field.
	// --duplicate-window 0 is the one documented default.
	t := m.Worker.Topology
	negative := false
	for _, z := range []struct {
		flag  string
		value int64
	}{
		{"--concurrency", int64(m.Worker.Concurrency)}, {"--task-concurrency", int64(m.Worker.TaskConcurrency)},
		{"--catalog-per-key", int64(m.Worker.Catalog.PerKey)}, {"--catalog-concurrency", int64(m.Worker.Catalog.Total)},
		{"--max-parallel", int64(m.Worker.MaxParallel)}, {"--ack-wait", int64(t.AckWait)},
		{"--max-deliver", int64(t.MaxDeliver)}, {"--replicas", int64(t.Replicas)}, {"--max-ack-pending", int64(t.MaxAckPending)},
		{"--grace", int64(m.Worker.Grace)}, {"--call-timeout", int64(m.Worker.CallTimeout)},
		{"--max-step-bytes", int64(m.Worker.MaxStepBytes)}, {"--repair-limit", int64(m.Worker.RepairLimit)}, {"--media-budget", int64(m.Worker.MediaBudget)},
		{"--outputs-max-age", int64(t.OutputsMaxAge)}, {"--state-ttl", int64(t.StateTTL)},
		{"--approval-timeout", int64(m.Worker.Approval.Timeout)},
	} {
		switch {
		case z.value == 0:
			errs = append(errs, fmt.Errorf("%s must be more than 0 (leave it out for the default)", z.flag))
		case z.value < 0:
			errs = append(errs, fmt.Errorf("%s must be more than 0, not %s", z.flag, flagValue(z.flag, z.value)))
			negative = true
		}
	}
	if err := m.Sandbox.validate(); err != nil {
		errs = append(errs, err)
	}
	if l := m.MCPBounds.Limits; l.MemoryBytes < 16<<20 || l.Pids < 8 || !(l.CPU >= 0.01) {
		errs = append(errs, fmt.Errorf("--mcp-memory must be at least 16 MiB (not %d), --mcp-pids at least 8 (not %d), --mcp-cpu at least 0.01 (not %g)", l.MemoryBytes, l.Pids, l.CPU))
	}
	if err := m.Worker.Validate(); err != nil && !negative {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// flagValue prints the value of one of validate's numeric flags as it
// would be written: a duration with its unit, or a number.
func flagValue(flag string, v int64) string {
	switch flag {
	case "--ack-wait", "--grace", "--call-timeout", "--outputs-max-age", "--state-ttl", "--approval-timeout":
		return time.Duration(v).String()
	}
	return fmt.Sprint(v)
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
		if m.unlock, err = lockDataDir(m.DataDir); err != nil {
			return err
		}
		eo := bus.EmbeddedOptions{Host: host, Port: port, HTTPPort: m.MonitorPort, StoreDir: m.DataDir, NoMonitoring: m.MonitorPort == 0,
			MaxStore: m.StoreMax, Logger: m.log}
		if m.server, err = bus.StartEmbedded(eo); err != nil {
			return portHint(err)
		}
		url = m.server.ClientURL()
		m.log.Info("embedded NATS server with JetStream started", "url", url, "monitoring", m.monitorURL(host), "data_dir", m.DataDir)
		if m.Computer.Root != "" && sameFileSystem(m.DataDir, m.Computer.Root) {
			m.log.Warn("the JetStream store and the agent homes share a file system: an agent that fills it stops every agent's steps until space is freed (the store restarts by itself then); give --data-dir another file system, or bound each home with --home-quota and --home-files",
				"data_dir", m.DataDir, "computer_root", m.Computer.Root)
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
	w, err := start(setupCtx, m.nc, Config{Logger: m.log, engine: m.Worker}, es, b)
	if err != nil {
		return m.storageHint(err)
	}
	return w.Run(ctx)
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
		nats.Name("turn-worker " + m.Worker.Name),
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
