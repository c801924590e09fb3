package engine

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/catalog"
	"github.com/agentbull/toolruntime/internal/media"
	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/telemetry"
	"github.com/agentbull/toolruntime/internal/turn"
)

// The defaults of Config this package owns; the others are those of the
// packages that use the setting (turn, schema, media, bus). withDefaults
// fills a zero field from them, and RegisterFlags shows the same values
// as its flags' defaults.
const (
	// DefaultName is the name of a worker given none. Package worker
	// gives each worker host-pid instead.
	DefaultName = "worker"
	// DefaultConcurrency bounds the main-turn steps handled at once. A
	// step spends most of its time waiting on the server, so this is high.
	DefaultConcurrency = 256
	// DefaultTaskConcurrency bounds the task-turn steps handled at once.
	DefaultTaskConcurrency = 16
	// DefaultGrace is how long a stop waits for running steps.
	DefaultGrace = 30 * time.Second
)

// placeholderVersion stands for the version of a worker given none:
// the micro service needs a SemVer. Package worker always gives one.
const placeholderVersion = "0.0.0"

// Config is how a worker runs: the one configuration of the engine, which
// cmd/worker's flags fill (RegisterFlags) and package worker's Config maps
// onto. The zero value of each field takes the default.
type Config struct {
	// Name identifies this worker in logs and call claims (DefaultName).
	Name    string
	Version string
	// Metadata is added to the micro service's (which also says the
	// protocol version): cmd/worker sets worker_version and categories.
	Metadata map[string]string
	// Topology of the streams, consumers and buckets (bus.Topology's
	// defaults).
	Topology bus.Topology
	// Concurrency bounds the main-turn steps handled at once
	// (DefaultConcurrency).
	Concurrency int
	// TaskConcurrency bounds the task-turn steps handled at once
	// (DefaultTaskConcurrency); it is separate so neither kind of turn can
	// starve the other.
	TaskConcurrency int
	// KeySteps bounds one fairness key's main-turn steps handled at once
	// (7/8 of Concurrency), KeyTaskSteps its task-turn steps (7/8 of
	// TaskConcurrency): the rest is kept for keys that arrive later.
	KeySteps, KeyTaskSteps int
	// HoldSteps bounds the main-turn steps the intake keeps queued here
	// for their key's turn before it spills to TURN_BACKLOG (0: 128 ×
	// Concurrency; task turns: 128 × TaskConcurrency); HoldBytes their
	// bytes, per work stream (0: 64 MiB).
	HoldSteps, HoldBytes int
	// FairStage, when set, is told when a main-turn step reaches each of
	// the intake's stages (fairshare.Intake.Stage): timelines for loadgen.
	FairStage func(stage, subject string)
	// Grace is how long a stop waits for running steps (DefaultGrace).
	Grace time.Duration
	// MaxStepBytes is the largest step message processed
	// (Topology.MaxMsgSize).
	MaxStepBytes int
	// CallTimeout is the default time limit of one call
	// (turn.DefaultTimeout).
	CallTimeout time.Duration
	// MaxParallel bounds the parallel calls of one step
	// (turn.DefaultMaxParallel).
	MaxParallel int
	// RepairLimit is the size above which arguments are not repaired
	// (schema.DefaultRepairLimit).
	RepairLimit int
	// MediaBudget bounds the data URLs of one output's images and files
	// (media.DefaultBudget); at most half of an event is used for them.
	MediaBudget int
	// Telemetry, when set, gets spans, metrics and readiness.
	Telemetry *telemetry.Telemetry
	// Catalog bounds the turn.tools requests built at once, per fairness
	// key and in all (catalog.Limits, with its defaults).
	Catalog catalog.Limits
	// Approval says which calls of main turns wait for a person's
	// approval, and for how long (turn.DefaultApprovalTimeout); a step's
	// context.approval adds to it. Task turns are never held.
	Approval turn.Policy
	// Interest, when set, says whether the server has a subscriber for a
	// subject; bus.Embedded.Interest answers it for the server in this
	// process. Activity events nobody subscribes to are then not sent:
	// core NATS would drop them, after the client and the server had
	// each spent a message on them (two of a step's six).
	Interest func(subject string) bool
}

// withDefaults fills the zero fields: the one place the defaults are
// applied.
func (c Config) withDefaults() Config {
	c.Topology = c.Topology.WithDefaults()
	c.Catalog = c.Catalog.WithDefaults()
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Version == "" {
		c.Version = placeholderVersion
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.TaskConcurrency == 0 {
		c.TaskConcurrency = DefaultTaskConcurrency
	}
	if c.KeySteps == 0 {
		c.KeySteps = max(1, c.Concurrency*7/8)
	}
	if c.KeyTaskSteps == 0 {
		c.KeyTaskSteps = max(1, c.TaskConcurrency*7/8)
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.MaxStepBytes == 0 {
		c.MaxStepBytes = int(c.Topology.MaxMsgSize)
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = turn.DefaultTimeout
	}
	if c.MaxParallel == 0 {
		c.MaxParallel = turn.DefaultMaxParallel
	}
	if c.RepairLimit == 0 {
		c.RepairLimit = schema.DefaultRepairLimit
	}
	if c.Approval.Timeout == 0 {
		c.Approval.Timeout = turn.DefaultApprovalTimeout
	}
	if c.MediaBudget == 0 {
		c.MediaBudget = media.DefaultBudget
	}
	return c
}

// RegisterFlags registers on fs the flags of c's settings, each with the
// default the worker would take (withDefaults): setting a field of c
// before makes its value the flag's default. A setting derived from
// others (--key-steps, --hold-steps, --duplicate-window, …) shows 0, its
// "derived" value. The storage and the approval policy are strings the
// program parses (--storage, --approval); they are not registered here.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := c.withDefaults()
	t, dt := &c.Topology, d.Topology
	fs.StringVar(&c.Name, "name", d.Name, "this worker's name in logs and call claims")
	fs.IntVar(&c.Concurrency, "concurrency", d.Concurrency, "main-turn steps handled at once")
	fs.IntVar(&c.TaskConcurrency, "task-concurrency", d.TaskConcurrency, "workflow task-turn steps handled at once")
	fs.IntVar(&c.Catalog.PerKey, "catalog-per-key", d.Catalog.PerKey, fmt.Sprintf("turn.tools requests of one fairness key (else agent) built at once; more wait, up to %d a key, then are refused with 503", d.Catalog.Waiting))
	fs.IntVar(&c.Catalog.Total, "catalog-concurrency", d.Catalog.Total, "turn.tools requests built at once, all keys together")
	// Fair share (protocol 1.2): what one fairness key may hold at once.
	fs.IntVar(&c.KeySteps, "key-steps", c.KeySteps, "main-turn steps one fairness key may have running on this worker (0: 7/8 of --concurrency; the rest is kept for other keys)")
	fs.IntVar(&c.KeyTaskSteps, "key-task-steps", c.KeyTaskSteps, "task-turn steps one fairness key may have running on this worker (0: 7/8 of --task-concurrency)")
	fs.IntVar(&c.HoldSteps, "hold-steps", c.HoldSteps, "main-turn steps the intake keeps queued on this worker, unacknowledged, for their key's turn before it moves more to TURN_BACKLOG (0: 128 x --concurrency; one key at most 7/8)")
	fs.IntVar(&c.HoldBytes, "hold-bytes", c.HoldBytes, "bytes of those steps, per work stream (0: 64 MiB; one key at most 7/8)")
	fs.DurationVar(&c.Grace, "grace", d.Grace, "on SIGINT/SIGTERM, how long running steps may finish")
	fs.DurationVar(&c.CallTimeout, "call-timeout", d.CallTimeout, "default time limit of one call")
	fs.IntVar(&c.MaxParallel, "max-parallel", d.MaxParallel, "parallel calls of one step running at once")
	fs.IntVar(&c.RepairLimit, "repair-limit", d.RepairLimit, "argument size in bytes above which no repair is tried")
	fs.IntVar(&c.MediaBudget, "media-budget", d.MediaBudget, "bytes of images and PDFs (as base64 data URLs) one call's output may hold, at most half the server's max payload; larger images are scaled down, other media replaced by a note")
	fs.IntVar(&c.MaxStepBytes, "max-step-bytes", d.MaxStepBytes, "largest step message processed; larger ones are dead-lettered")
	fs.DurationVar(&c.Approval.Timeout, "approval-timeout", d.Approval.Timeout, "how long a step waits for approval before its calls are answered rejected (shorter than --state-ttl)")
	fs.IntVar(&t.Replicas, "replicas", dt.Replicas, "replicas of the streams, consumers and buckets")
	fs.DurationVar(&t.AckWait, "ack-wait", dt.AckWait, "ack wait of the work consumers (leases are renewed at a third of it)")
	fs.IntVar(&t.MaxDeliver, "max-deliver", dt.MaxDeliver, "deliveries of a step before it is dead-lettered")
	fs.IntVar(&t.MaxAckPending, "max-ack-pending", dt.MaxAckPending, "steps out with the fleet at once, per consumer (running, and held by the workers' intakes: keep it above the workers' --hold-steps summed)")
	fs.DurationVar(&t.DuplicateWindow, "duplicate-window", t.DuplicateWindow, "duplicate window of the streams (default: the redelivery span, at least 2m)")
	fs.DurationVar(&t.OutputsMaxAge, "outputs-max-age", dt.OutputsMaxAge, "how long TURN_OUTPUTS keeps events")
	fs.DurationVar(&t.StateTTL, "state-ttl", dt.StateTTL, "how long TURN_STATE keeps per-turn state (steps pending approval included)")
}

// Validate checks a configuration after defaults, with messages that say
// which setting is wrong.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if err := c.Topology.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Catalog.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency must be at least 1, not %d", c.Concurrency))
	}
	if c.HoldSteps < 0 || c.HoldBytes < 0 {
		errs = append(errs, fmt.Errorf("hold steps and hold bytes must be 0 (the default) or more, not %d and %d", c.HoldSteps, c.HoldBytes))
	}
	if c.TaskConcurrency < 1 {
		errs = append(errs, fmt.Errorf("task concurrency must be at least 1, not %d", c.TaskConcurrency))
	}
	if c.KeySteps < 1 || c.KeySteps > c.Concurrency || c.KeyTaskSteps < 1 || c.KeyTaskSteps > c.TaskConcurrency {
		errs = append(errs, fmt.Errorf("key steps must be from 1 to the concurrency (%d), not %d, and key task steps from 1 to the task concurrency (%d), not %d", c.Concurrency, c.KeySteps, c.TaskConcurrency, c.KeyTaskSteps))
	}
	if c.Grace < 0 || c.CallTimeout < 0 {
		errs = append(errs, errors.New("grace and call timeout must not be negative"))
	}
	if c.MaxParallel < 1 {
		errs = append(errs, fmt.Errorf("max parallel calls must be at least 1, not %d", c.MaxParallel))
	}
	if c.MediaBudget < 0 {
		errs = append(errs, fmt.Errorf("media budget must not be negative, not %d", c.MediaBudget))
	}
	if c.RepairLimit < 0 {
		errs = append(errs, fmt.Errorf("repair limit must not be negative, not %d", c.RepairLimit))
	}
	if c.Approval.Timeout < time.Second || c.Approval.Timeout >= c.Topology.StateTTL {
		// The record of a pending step lives in TURN_STATE until its
		// timer fires: it must outlive the wait.
		errs = append(errs, fmt.Errorf("approval timeout must be at least 1s and shorter than the state TTL %s (a pending step is kept in TURN_STATE until it is decided), not %s", c.Topology.StateTTL, c.Approval.Timeout))
	}
	return errors.Join(errs...)
}
