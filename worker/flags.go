package worker

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/backgroundjobs"
	"github.com/agentbull/toolruntime/internal/category/brain"
	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/category/schedules"
	"github.com/agentbull/toolruntime/internal/category/skills"
	"github.com/agentbull/toolruntime/internal/category/todo"
	"github.com/agentbull/toolruntime/internal/category/web"
	"github.com/agentbull/toolruntime/internal/natsconn"
	"github.com/agentbull/toolruntime/internal/telemetry"
	"github.com/agentbull/toolruntime/internal/turn"
)

// The program's configuration is registered section by section, each
// flag with its default written once: a constant here, a Default… of the
// package that uses the setting, or the engine's (engine.Config's
// RegisterFlags). --help lists the flags sorted by name, whatever the
// section.

// serverConfig is the embedded NATS server's, started when no URL is
// given.
type serverConfig struct {
	Listen      string
	MonitorPort int
	DataDir     string
	StoreMax    int64
	// dataDirGiven is whether --data-dir (or WORKER_DATA_DIR) was given:
	// without, --storage memory keeps nothing (Run).
	dataDirGiven bool
}

const (
	defaultListen      = "127.0.0.1:4222"
	defaultMonitorPort = 8222
	// dataDirName is the data directory's folder in the user's cache
	// directory.
	dataDirName = "toolruntime"
)

func (c *serverConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", defaultListen, "embedded server: client address")
	fs.IntVar(&c.MonitorPort, "monitor-port", defaultMonitorPort, "embedded server: monitoring port (0 turns it off)")
	fs.StringVar(&c.DataDir, "data-dir", defaultDataDir(), "embedded server: JetStream storage directory (given --storage memory and no --data-dir, a new one for the run, removed at its stop)")
	fs.Int64Var(&c.StoreMax, "store-max-bytes", 0, "embedded server: most bytes the JetStream store may use (0: 75% of the space free in --data-dir at start)")
}

// defaultDataDir is <user cache directory>/toolruntime/jetstream (on
// Linux ~/.cache/toolruntime/jetstream), or beneath the temporary
// directory when there is no cache directory.
func defaultDataDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, dataDirName, "jetstream")
	}
	return filepath.Join(os.TempDir(), dataDirName, "jetstream")
}

// telemetryConfig is the logs', metrics', profiles' and spans'.
type telemetryConfig struct {
	HTTPAddr     string
	Pprof        bool
	GCPercent    int
	OTLPEndpoint string
	OTLPInsecure bool
	otlpFromEnv  bool
	LogFormat    string
	LogLevel     string
}

// defaultGCPercent is Go's GC target percentage: a worker's live heap is
// small, and collecting less often saves CPU on every step.
const defaultGCPercent = 400

// embeddedGCPercent is the target when the process holds the embedded
// server, unless --gc-percent or GOGC says otherwise: the server's state
// (the duplicate windows' message ids, the streams' subjects, block
// caches) grows the live heap to tens of MB, and at 400 the heap peaks
// at five times that, each cycle touching fresh pages (page faults,
// spans set up anew) more than the extra collections cost.
const embeddedGCPercent = 200

func (c *telemetryConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.HTTPAddr, "http-addr", "", "serve Prometheus /metrics, /healthz and /readyz on this address (e.g. 0.0.0.0:9090; empty: off)")
	fs.IntVar(&c.GCPercent, "gc-percent", defaultGCPercent, "Go's GC target percentage, unless GOGC is set: a worker's live heap is small, and collecting less often saves CPU on every step (200 by default with the embedded server, whose state makes the heap larger)")
	fs.BoolVar(&c.Pprof, "pprof", false, "also serve Go's profiles under /debug/pprof/ on --http-addr")
	fs.StringVar(&c.OTLPEndpoint, "otlp-endpoint", "", "send trace spans over OTLP/HTTP to this collector (host:port or URL; /v1/traces is added to a URL without a path; empty: where OTEL_EXPORTER_OTLP_ENDPOINT says, else no export)")
	fs.BoolVar(&c.OTLPInsecure, "otlp-insecure", false, "send spans without TLS")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
}

// builtinConfig is the built-in categories': those with state in
// JetStream, each on unless switched off (Replicas and Storage of their
// buckets and streams come from the engine's topology); the agent
// computer, on when its root is set; the web; MCP servers and skills,
// each off unless its file or directory is given; and the diagnostics.
type builtinConfig struct {
	TodoOn      bool
	Todo        todo.Config
	BrainOn     bool
	Brain       brain.Config
	SchedulesOn bool
	Schedules   schedules.Config
	JobsOn      bool
	Jobs        backgroundjobs.Config
	// OutputBudget is the computer's and the web's.
	OutputBudget int
	Computer     computer.Config
	CommandEnv   string
	Sandbox      commandSandbox
	Web          web.Config
	WebAllow     string
	MCPConfig    string
	// MCPBounds bound each MCP server's tool listing (--mcp-list-*).
	MCPBounds mcp.Options
	// MCPTokenKeys is the file of the keys sealing MCP OAuth tokens
	// (else the environment variable TOOLRUNTIME_MCP_TOKEN_KEYS);
	// MCPConnectURL the console's connect page.
	MCPTokenKeys, MCPConnectURL string
	SkillsDir                   string
	Diagnostics                 bool
	MarkDir                     string
}

func (c *builtinConfig) register(fs *flag.FlagSet) {
	c.registerState(fs)
	c.registerComputer(fs)
	c.Sandbox.register(fs)
	c.registerWeb(fs)
	c.registerMCP(fs)
	fs.StringVar(&c.SkillsDir, "skills-dir", "", "directory of skills, one folder with a SKILL.md each (empty: none)")
	fs.BoolVar(&c.Diagnostics, "diagnostics", false, "offer the diagnostics tools (ping, sleep, finish, mark) to turns that bind \"diagnostics\"")
	fs.StringVar(&c.MarkDir, "mark-dir", "", "directory where the diagnostics tool mark appends its lines (empty: no mark tool)")
}

// registerState registers the flags of the categories with state in
// JetStream: todo, brain, schedules and background_jobs.
func (c *builtinConfig) registerState(fs *flag.FlagSet) {
	fs.BoolVar(&c.TodoOn, "todo", true, "offer todo_write and todo_read to every main turn (a context can switch them off with \"todo\": false)")
	fs.DurationVar(&c.Todo.TTL, "todo-ttl", todo.DefaultTTL, "how long TODOS keeps a turn's list after its last write")
	fs.BoolVar(&c.BrainOn, "brain", true, "offer the brain tools to turns that bind \"brain\" (task turns: recall and get_page)")
	fs.IntVar(&c.Brain.MaxPageBytes, "brain-max-page-bytes", brain.DefaultMaxPageBytes, "largest brain page")
	fs.IntVar(&c.Brain.MaxPages, "brain-max-pages", brain.DefaultMaxPages, "most brain pages of one agent")
	fs.IntVar(&c.Brain.CacheBytes, "brain-cache-bytes", brain.DefaultCacheBytes, "memory for this worker's cache of search indexes")
	fs.BoolVar(&c.SchedulesOn, "schedules", true, "offer the schedule tools to main turns that bind \"schedules\" (needs nats-server 2.12 or later)")
	fs.DurationVar(&c.Schedules.MinInterval, "schedule-min-interval", schedules.DefaultMinInterval, "shortest interval a schedule may fire at (at least 1s)")
	fs.IntVar(&c.Schedules.MaxPerAgent, "schedule-max-per-agent", schedules.DefaultMaxPerAgent, "most schedules of one agent")
	fs.DurationVar(&c.Schedules.FireTTL, "schedule-fire-ttl", schedules.DefaultFireTTL, "how long SCHEDULES keeps a fired message for the gateway")
	fs.BoolVar(&c.JobsOn, "background-jobs", true, "offer the background job tools to main turns that bind \"background_jobs\", and apply the job runner's reports")
	fs.IntVar(&c.Jobs.MaxOpen, "jobs-max-open", backgroundjobs.DefaultMaxOpen, "most queued or running jobs of one agent")
	fs.DurationVar(&c.Jobs.RecordTTL, "jobs-record-ttl", backgroundjobs.DefaultRecordTTL, "how long JOBS keeps a job after its last change")
	fs.DurationVar(&c.Jobs.EventsMaxAge, "jobs-events-max-age", backgroundjobs.DefaultEventsMaxAge, "how long JOB_EVENTS keeps announcements, cancels and reports")
	fs.IntVar(&c.Jobs.MaxResultBytes, "jobs-max-result-bytes", backgroundjobs.DefaultMaxResultBytes, "largest job result kept (longer ones are clipped)")
}

// registerComputer registers the agent computer's flags but its
// sandbox's (commandSandbox.register).
func (c *builtinConfig) registerComputer(fs *flag.FlagSet) {
	fs.IntVar(&c.OutputBudget, "output-budget", computer.DefaultOutputBudget, "bytes of one computer or web tool result the model reads; longer results keep their head (and tail) with a note")
	fs.StringVar(&c.Computer.Root, "computer-root", "", "directory of the agent homes (<root>/<agent_id>); set it to offer the computer tools to main turns that bind \"computer\" (empty: off)")
	fs.DurationVar(&c.Computer.CommandTimeout, "command-timeout", computer.DefaultCommandTimeout, "run_command's time limit when a call sets none")
	fs.DurationVar(&c.Computer.MaxCommandTimeout, "max-command-timeout", computer.DefaultMaxCommandTimeout, "longest time limit a run_command call may ask for")
	fs.Int64Var(&c.Computer.MaxLogBytes, "command-log-bytes", computer.DefaultMaxLogBytes, "output of one command kept in the home's .outputs directory")
	fs.Int64Var(&c.Computer.MaxFileBytes, "file-max-bytes", computer.DefaultMaxFileBytes, "largest content write_file writes and largest file edit_file reads or makes (read_file returns at most --output-budget per call)")
	fs.Int64Var(&c.Computer.HomeQuotaBytes, "home-quota", computer.DefaultHomeQuotaBytes, "bytes on disk each agent home may hold; a write or command over it is refused or stopped (-1: no bound)")
	fs.Int64Var(&c.Computer.HomeQuotaFiles, "home-files", computer.DefaultHomeQuotaFiles, "files, directories and links each agent home may hold (-1: no bound)")
	fs.StringVar(&c.Computer.QuotaMode, "home-quota-mode", computer.QuotaAuto, "how homes are held to --home-quota and --home-files: auto (kernel where the host allows it, else estimate; the start log says which and why), kernel (an ext4 image of its own per home, loop-mounted: needs root or CAP_SYS_ADMIN, loop devices and mkfs.ext4) or estimate (the worker counts)")
	fs.Int64Var(&c.Computer.DiskReserve, "home-reserve", 0, "free bytes the homes together never take from their file system, for the JetStream store and the system (0: 128 MiB, at most an eighth of the file system; -1: none)")
	fs.StringVar(&c.Computer.StorePath, "store-path", "", "the JetStream store's directory of an external server, when it is on this host: the start log says whether it shares the homes' file system (the embedded server's is known)")
	fs.StringVar(&c.Computer.Path, "command-path", computer.DefaultPath, "PATH of commands")
	fs.StringVar(&c.CommandEnv, "command-env", "", "more environment for commands: KEY=value pairs, comma-separated (nothing of the worker's own environment reaches them)")
}

func (c *builtinConfig) registerWeb(fs *flag.FlagSet) {
	fs.BoolVar(&c.Web.Fetch, "web-fetch", false, "offer web_fetch to turns that bind \"web\"")
	fs.StringVar(&c.Web.SearchURL, "web-search-url", "", "base URL of a SearXNG instance with its JSON API on; offers web_search to turns that bind \"web\" (empty: no web_search)")
	fs.StringVar(&c.WebAllow, "web-allow", "", "comma-separated ranges, addresses, host names or *.domains (each optionally :port) web_fetch may reach although they are not public")
	fs.DurationVar(&c.Web.Timeout, "web-timeout", web.DefaultTimeout, "time limit of one fetch or search")
	fs.Int64Var(&c.Web.MaxBytes, "web-max-bytes", web.DefaultMaxBytes, "body bytes web_fetch reads from one page")
	fs.IntVar(&c.Web.MaxRedirects, "web-max-redirects", web.DefaultMaxRedirects, "redirects one fetch follows (negative: none)")
	fs.StringVar(&c.Web.UserAgent, "web-user-agent", web.DefaultUserAgent, "User-Agent of fetches and searches")
}

func (c *builtinConfig) registerMCP(fs *flag.FlagSet) {
	b := &c.MCPBounds
	fs.StringVar(&c.MCPConfig, "mcp-config", "", "JSON file naming the MCP servers turns may enable (empty: none)")
	fs.StringVar(&c.MCPTokenKeys, "mcp-token-keys", "", "file of the keys sealing MCP OAuth tokens in the MCP_TOKENS bucket, one <id>:<base64 32 bytes> a line, the first sealing (empty: the environment variable TOOLRUNTIME_MCP_TOKEN_KEYS); needed when a server has oauth")
	fs.StringVar(&c.MCPConnectURL, "mcp-connect-url", "", "the console's connect page, where a person connects an MCP server's account (the auth.required event's url; a server's oauth.connect_url overrides it)")
	fs.IntVar(&b.MaxListPages, "mcp-list-pages", mcp.DefaultMaxListPages, "most pages of one MCP server's tools/list read; past a bound the listing keeps the tools that fit and the model is told")
	fs.IntVar(&b.MaxListTools, "mcp-list-tools", mcp.DefaultMaxListTools, "most tools taken of one MCP server")
	fs.IntVar(&b.MaxListBytes, "mcp-list-bytes", mcp.DefaultMaxListBytes, "most bytes of tool definitions (JSON) taken of one MCP server")
	fs.DurationVar(&b.ListTimeout, "mcp-list-timeout", mcp.DefaultListTimeout, "longest one MCP server's tools/list may take")
	fs.Int64Var(&b.Limits.MemoryBytes, "mcp-memory", mcp.DefaultServerMemory, "all the memory one MCP stdio server and what it starts may hold, in bytes (the memory limit of its own cgroup; beyond it the kernel kills the server and the call is told)")
	fs.IntVar(&b.Limits.Pids, "mcp-pids", mcp.DefaultServerPids, "processes and threads of one MCP stdio server's cgroup at once (pids.max)")
	fs.Float64Var(&b.Limits.CPU, "mcp-cpu", mcp.DefaultServerCPU, "CPU of one MCP stdio server's cgroup, in cores (cpu.max)")
}

// registerFlags registers every flag of the program, section by section.
// The engine's flags take their defaults from m.Worker, which
// Config.engine set from the program's Config.
func (m *program) registerFlags(fs *flag.FlagSet) {
	m.Conn.Register(fs, "NATS server or cluster URLs (comma-separated); empty starts an embedded server")
	m.serverConfig.register(fs)
	m.telemetryConfig.register(fs)
	m.Worker.RegisterFlags(fs)
	fs.StringVar(&m.Storage, "storage", cmp.Or(m.Storage, "file"), "storage of the streams and buckets: file or memory")
	fs.StringVar(&m.Approval, "approval", "none", "calls of main turns that wait for a person's approval: none, destructive, all, or a comma-separated list of tool names and namespace.* (an MCP config's \"approval\" adds to it)")
	m.builtinConfig.register(fs)
}

// ParseFlags reads flags, then the environment for flags not given.
func (m *program) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	// A mistyped flag is its error and a pointer to --help (main prints
	// them), not the whole usage burying the one line that matters; the
	// usage goes to stdout when asked for.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	m.registerFlags(fs)
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
	m.dataDirGiven = set["data-dir"]
	if err := m.Conn.Resolve(set, os.LookupEnv); err != nil {
		return err
	}
	if !set["gc-percent"] && m.Conn.URL == "" {
		m.GCPercent = embeddedGCPercent
	}
	// The exporter reads the OTEL_EXPORTER_OTLP_* variables itself; they
	// are looked at here, with every other variable, so that the
	// environment can be cleaned once the flags are parsed.
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if os.Getenv(v) != "" {
			m.otlpFromEnv = true
		}
	}
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
	if m.cfgErr != nil {
		errs = append(errs, fmt.Errorf("the program's %w (worker.Config.Version, or -X main.version)", m.cfgErr))
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
	if m.Schedules.MinInterval < schedules.ServerMinInterval || m.Schedules.FireTTL < time.Second || m.Schedules.MaxPerAgent < 1 {
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
