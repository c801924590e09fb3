package workflowtask

import (
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/tool"
)

// Default limits of a zero Config.
const (
	DefaultMaxTasks       = 32
	DefaultMaxSchemaBytes = 64 << 10
	DefaultMaxResultBytes = 256 << 10
)

// Config configures a Service. The zero value of each field works.
type Config struct {
	// Web is the web category; a task turn gets whatever it offers a turn
	// that binds only "web", and only when the step binds web. Zero: task
	// turns have no web tools.
	Web tool.Category
	// Brain is the brain category; a task turn takes only recall and
	// get_page from it, and only when they are read-only, for a turn that
	// binds only "brain", when the step binds brain. Zero: none.
	Brain tool.Category
	// Events publishes workflow events; nil publishes with a
	// bus.Publisher on the JetStream context given to New.
	Events EventPublisher
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MaxTasks bounds the tasks of one workflow (32).
	MaxTasks int
	// MaxSchemaBytes bounds one task's result schema (64 KiB).
	MaxSchemaBytes int
	// MaxResultBytes bounds one submitted result (256 KiB).
	MaxResultBytes int
}

// Service owns workflows: it provides the main-turn workflow tools
// (Category) and serves workflow task turns (Catalog and Run, the
// worker's TaskTurns). It is safe for concurrent use; several services
// on several workers share one WORKFLOWS bucket.
type Service struct {
	cfg    Config
	store  *store
	events EventPublisher
	log    *slog.Logger
	submit submitCache
	main   []*tool.Tool
}

// New returns a service over the WORKFLOWS and TURN_STATE buckets and
// the WORKFLOW_EVENTS stream of js. The buckets need not exist yet (the
// worker creates them when it starts); they are opened on first use.
func New(js jetstream.JetStream, cfg Config) *Service {
	if cfg.MaxTasks <= 0 {
		cfg.MaxTasks = DefaultMaxTasks
	}
	if cfg.MaxSchemaBytes <= 0 {
		cfg.MaxSchemaBytes = DefaultMaxSchemaBytes
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	s := &Service{cfg: cfg, events: cfg.Events, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.store = &store{js: js, retry: bus.Retry{Logger: s.log}}
	if s.events == nil {
		s.events = &bus.Publisher{JS: js, Logger: s.log}
	}
	s.main = s.mainTools()
	return s
}

// now is the time recorded in records and events, in UTC.
func (s *Service) now() time.Time { return time.Now().UTC() }
