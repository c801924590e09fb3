package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/tool"
)

// DefaultVersion is the version a worker reports when none is given.
const DefaultVersion = "0.0.0-dev"

// Config configures a worker: one made by [New], or the program [Main]
// runs. The zero value of each field takes the default.
//
// Main reads the fields as the defaults of its flags of the same name
// (--name, --concurrency, --grace, --call-timeout, --max-parallel,
// --replicas, and --storage memory for MemoryStorage), which the command
// line and the environment override; it logs as --log-format and
// --log-level say, not to Logger.
type Config struct {
	// Name identifies the worker in logs, call claims and its micro
	// service: each worker of a fleet needs its own (host-pid; give two
	// workers of one process names of their own).
	Name string
	// Version is the program's version (SemVer; a leading "v", as in Go
	// module versions, is dropped), reported in the worker's micro service
	// info, its telemetry and its MCP client (DefaultVersion).
	Version string
	// Logger gets the structured logs of a worker made by New
	// (slog.Default()).
	Logger *slog.Logger
	// Concurrency bounds the main-turn steps handled at once (256).
	Concurrency int
	// Grace is how long Run, once its context ends, lets running steps
	// finish (30 s); steps still running then are delivered again.
	Grace time.Duration
	// CallTimeout is the time limit of a call whose tool sets none (2 min).
	CallTimeout time.Duration
	// MaxParallel bounds the calls of one step running at once (8).
	MaxParallel int
	// Replicas of the streams, consumers and buckets the worker creates
	// or updates (1); MemoryStorage keeps them in memory, not in files.
	Replicas      int
	MemoryStorage bool
}

// Main runs the worker program with categories, the program's own, until
// a signal (or the end of ctx) stops it, then exits the process: with 0
// after a clean stop or --help, 2 when the flags or the environment are
// wrong (one line saying what, on stderr), 1 when the worker failed. The
// program's categories come, in their order, after the built-in todo,
// computer, web, brain, schedules, background_jobs and workflows, and
// before skills, mcp and diagnostics (whose tools vary by turn): each
// built-in is on or off, and configured, by its flags. When the process
// is PID 1 (a container's only process), Main first becomes its init: it
// runs the program as its child, forwards signals and reaps orphans.
func Main(ctx context.Context, cfg Config, categories ...tool.Category) {
	os.Exit(run(ctx, cfg, categories, os.Args[1:]))
}

// toEngine sets the fields of e that c sets, and e's version: the one
// mapping of Config onto the engine's configuration, for New (onto a zero
// one) and for Main (onto the one its flags then fill).
func (c Config) toEngine(e *engine.Config) error {
	e.Name = cmp.Or(c.Name, e.Name, hostPID())
	e.Grace, e.CallTimeout = cmp.Or(c.Grace, e.Grace), cmp.Or(c.CallTimeout, e.CallTimeout)
	e.Concurrency, e.MaxParallel = cmp.Or(c.Concurrency, e.Concurrency), cmp.Or(c.MaxParallel, e.MaxParallel)
	e.Topology.Replicas = cmp.Or(c.Replicas, e.Topology.Replicas)
	if c.MemoryStorage {
		e.Topology.Storage = jetstream.MemoryStorage
	}
	e.Version = DefaultVersion
	if c.Version != "" {
		e.Version = strings.TrimPrefix(c.Version, "v") // "v" alone is no version
	}
	if !semVer.MatchString(e.Version) {
		return fmt.Errorf("version %q is not SemVer", e.Version)
	}
	return nil
}

// hostPID is a worker's default name: unique on its host at a time.
func hostPID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// A Worker serves turns on one NATS connection: it assembles each step's
// tools from its categories, runs the calls and publishes their outputs,
// and answers catalog requests. Run it once.
type Worker struct {
	w    *engine.Worker
	runs []func(context.Context) error
}

// New sets up the protocol's streams, consumers and buckets on nc and
// returns a worker offering the tools of categories, in that order, to
// the main turns (a worker made by New serves no workflow task turns:
// Main's do). Two categories of one name, or one that Validate refuses,
// are an error. The caller keeps nc, and closes it after Run.
func New(nc *nats.Conn, cfg Config, categories ...tool.Category) (*Worker, error) {
	es, err := catalog(nil, categories)
	if err != nil {
		return nil, err
	}
	var e engine.Config
	if err := cfg.toEngine(&e); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return start(ctx, nc, e, cmp.Or(cfg.Logger, slog.Default()), es, nil)
}

// start is New over the engine's configuration e and entries es, with
// b's task turns and runs (b may be nil).
func start(ctx context.Context, nc *nats.Conn, e engine.Config, log *slog.Logger, es []tool.Category, b *builtins) (*Worker, error) {
	names := make([]string, len(es))
	for i, c := range es {
		names[i] = c.Name
	}
	e.Metadata = map[string]string{"worker_version": e.Version, "worker_name": e.Name, "categories": strings.Join(names, ",")}
	var tasks engine.TaskTurns
	var runs []func(context.Context) error
	if b != nil {
		tasks, runs = b.tasks, b.runs
	}
	w, err := engine.New(ctx, nc, e, turn.NewAssembler(es...), tasks, log)
	if err != nil {
		return nil, err
	}
	log.Info("connected", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName(), "categories", e.Metadata["categories"])
	return &Worker{w: w, runs: runs}, nil
}

// Run serves until ctx ends, then stops taking steps, lets those running
// finish within the grace, and returns nil; or returns the error that
// stopped it first.
func (w *Worker) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.w.Run(gctx) })
	for _, run := range w.runs {
		g.Go(func() error {
			// A stop while it was starting is a stop, not its failure.
			if err := run(gctx); err != nil && !(errors.Is(err, context.Canceled) && gctx.Err() != nil) {
				return err
			}
			return nil
		})
	}
	return g.Wait()
}

// semVer is what the NATS micro service takes as a version (semver.org's
// regular expression).
var semVer = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
