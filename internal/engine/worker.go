package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/catalog"
	"github.com/agentbull/toolruntime/internal/fairshare"
	"github.com/agentbull/toolruntime/internal/media"
	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/telemetry"
	"github.com/agentbull/toolruntime/internal/traceheader"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/turnstate"
	"github.com/agentbull/toolruntime/protocol"
)

// TaskTurns serves workflow task turns (package workflowtask).
type TaskTurns interface {
	// Catalog is the fixed catalog of a task turn.
	Catalog(ctx context.Context, req protocol.CatalogRequest) (*protocol.CatalogReply, error)
	// Run runs one task-turn step; errors as for turn.Runner.Run.
	Run(ctx context.Context, r *turn.Runner, st *protocol.Step) error
}

// Worker consumes steps and serves catalogs on one NATS connection.
type Worker struct {
	cfg     Config
	nc      *nats.Conn
	js      jetstream.JetStream
	log     *slog.Logger
	state   *turnstate.Store
	pub     *bus.Publisher
	dead    *bus.DeadLetters
	cancels *turn.Cancels
	// cancelWriter writes cancels' marks and notes off the subscription.
	cancelWriter *turnstate.CancelWriter
	runner       *turn.Runner
	// taskRunner is runner with task verdicts counted.
	taskRunner *turn.Runner
	tasks      TaskTurns
	meter      *telemetry.Metrics
	// fair are the fair-share consumers of main and task turns.
	fair []*fairshare.Intake
	// bindings shares the steps' equal bindings maps.
	bindings bindingsCache
}

// New sets up the protocol's streams, consumers and buckets and returns a
// worker over assembler (main turns) and tasks (task turns; nil serves
// none).
func New(ctx context.Context, nc *nats.Conn, cfg Config, assembler *turn.Assembler, tasks TaskTurns, log *slog.Logger) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.Default()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if err := bus.Setup(ctx, js, cfg.Topology); err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, nc: nc, js: js, log: log, tasks: tasks, cancels: turn.NewCancels()}
	w.pub = &bus.Publisher{JS: js, Logger: log, Interest: cfg.Interest}
	w.state = &turnstate.Store{KV: kv, Pub: w.pub, Worker: cfg.Name}
	w.dead = &bus.DeadLetters{JS: js, Pub: w.pub}
	w.cancelWriter = &turnstate.CancelWriter{State: w.state, Log: log}
	var meter *telemetry.Metrics
	if cfg.Telemetry != nil {
		meter = cfg.Telemetry.Metrics
	}
	w.meter = meter
	// Enough kept goroutines for every step in flight to run a few calls
	// at once; images are decoded a few at a time, whatever the steps.
	goroutines, slots := turn.NewGoroutines(4*cfg.Concurrency), media.NewSlots(runtime.GOMAXPROCS(0))
	newRunner := func(emitter turn.Emitter) *turn.Runner {
		r := &turn.Runner{
			Assembler: assembler,
			Dispatcher: turn.Dispatcher{
				MaxParallel: cfg.MaxParallel, Timeout: cfg.CallTimeout,
				Repair:  schema.RepairOptions{Limit: cfg.RepairLimit},
				Journal: w.state, Logger: log,
				Goroutines: goroutines,
				// Outcomes are clipped to what one event may hold on this
				// connection (the publisher clips again, exactly, should a
				// reconnect reach a server with a smaller limit).
				MaxEventBytes: protocol.EventBudget(nc.MaxPayload()),
				MediaBudget:   cfg.MediaBudget,
				MediaSlots:    slots,
			},
			Emitter: emitter, State: w.state, Cancels: w.cancels,
			Approval: cfg.Approval, Approvals: w.state,
			Hooks: meter.Hooks(),
		}
		if cfg.Telemetry != nil {
			r.Dispatcher.Tracer = cfg.Telemetry.Tracer
		}
		return r
	}
	w.runner = newRunner(w.pub)
	w.taskRunner = w.runner
	if meter != nil {
		// A runner of its own (a Dispatcher is not copied once made).
		w.taskRunner = newRunner(taskMeter{Emitter: w.pub, m: meter})
	}
	// Steps are served fairly per key (fairshare.Intake).
	w.fair = []*fairshare.Intake{{
		JS: w.js, Stream: protocol.StreamCalls, Durable: protocol.ConsumerCalls, Kind: fairshare.KindCall, Topology: w.cfg.Topology,
		Handler: w.handleStep, Start: w.startStep, Dead: w.dead, Logger: w.log, Concurrency: w.cfg.Concurrency, KeySteps: w.cfg.KeySteps,
		HoldSteps: w.cfg.HoldSteps, HoldBytes: w.cfg.HoldBytes, Stage: w.cfg.FairStage,
		Grace: w.cfg.Grace, Meter: w.stepMeter(),
	}}
	if w.tasks != nil {
		w.fair = append(w.fair, &fairshare.Intake{
			JS: w.js, Stream: protocol.StreamTasks, Durable: protocol.ConsumerTasks, Kind: fairshare.KindTask, Topology: w.cfg.Topology,
			Handler: w.handleTaskStep, Dead: w.dead, Logger: w.log, Concurrency: w.cfg.TaskConcurrency, KeySteps: w.cfg.KeyTaskSteps,
			HoldBytes: w.cfg.HoldBytes,
			Grace:     w.cfg.Grace, Meter: w.stepMeter(),
		})
	}
	if meter != nil {
		if err := meter.ObserveFair(w.FairKeys); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// JetStream is the worker's JetStream context, for packages it serves.
func (w *Worker) JetStream() jetstream.JetStream { return w.js }

// Publisher publishes events confirmed and retried.
func (w *Worker) Publisher() *bus.Publisher { return w.pub }

// Run serves until ctx ends, then stops gracefully: no more pulling,
// prefetched steps handed back, running steps given the grace period.
func (w *Worker) Run(ctx context.Context) error {
	svc, err := catalog.Serve(w.nc, catalog.Info{Version: w.cfg.Version, Metadata: w.cfg.Metadata, Tracer: w.runner.Dispatcher.Tracer, Limits: w.cfg.Catalog, Stats: w.fairStats}, w.Catalog, w.log)
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	cancelSub, err := bus.SubscribeCancels(w.nc, w.onCancel)
	if err != nil {
		return err
	}
	w.cancelWriter.Backlog = func() int { n, _, _ := cancelSub.Pending(); return n }
	defer func() { _ = cancelSub.Unsubscribe() }()
	stepCancelSub, err := turnstate.SubscribeStepCancels(w.nc, w.onStepCancel)
	if err != nil {
		return err
	}
	defer func() { _ = stepCancelSub.Unsubscribe() }()
	// Answers are few; as many are handled at once as task steps.
	approvals := &bus.Consumer{
		JS: w.js, Stream: protocol.StreamApprovals, Durable: protocol.ConsumerApprovals, Handler: w.handleApproval,
		Dead: w.dead, Logger: w.log, Concurrency: w.cfg.TaskConcurrency, Grace: w.cfg.Grace, Meter: w.stepMeter(),
		RetryDelay: w.cfg.Topology.RetryDelay,
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.state.WatchCancels(gctx, w.cfg.Topology.StateTTL) })
	g.Go(func() error { return w.cancelWriter.Run(gctx) })
	watch := [][2]string{{protocol.StreamApprovals, protocol.ConsumerApprovals}, {bus.StreamBacklog, "*"}}
	for _, f := range w.fair {
		watch = append(watch, [2]string{f.Stream, f.Durable})
		g.Go(func() error { return f.Run(gctx) })
	}
	for _, c := range watch {
		sub, err := w.dead.WatchDeliveryLimit(w.nc, c[0], c[1], w.stepMeter(), w.log)
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	g.Go(func() error { return approvals.Run(gctx) })
	if t := w.cfg.Telemetry; t != nil {
		t.SetReady(true)
		defer t.SetReady(false)
	}
	w.log.Info("worker running", "name", w.cfg.Name, "concurrency", w.cfg.Concurrency, "task_concurrency", w.cfg.TaskConcurrency, "task_turns", w.tasks != nil)
	err = g.Wait()
	// Acks are not waited for one by one; make sure the last ones left.
	if ferr := w.nc.FlushTimeout(5 * time.Second); ferr != nil {
		w.log.Warn("flushing the last acks failed; those steps will be delivered again and answered from the journal", "err", ferr)
	}
	w.log.Info("worker stopped", "name", w.cfg.Name)
	return err
}

// stepMeter is the metrics hook of the consumers, or nil.
func (w *Worker) stepMeter() bus.StepMeter {
	if w.meter == nil {
		return nil
	}
	return w.meter
}

// Metrics are the worker's instruments, or nil without telemetry.
func (w *Worker) Metrics() *telemetry.Metrics { return w.meter }

func (w *Worker) handleStep(ctx context.Context, msg jetstream.Msg) error {
	st, err := w.parseStep(msg)
	if err != nil {
		return err
	}
	return stepError(w.runner.Run(stepContext(ctx, msg), st))
}

// startStep is handleStep without a goroutine waiting for the step's
// calls (turn.Runner.Start): the worker's main-turn intake uses it, so
// that a step in flight keeps only its calls' goroutines.
func (w *Worker) startStep(ctx context.Context, msg jetstream.Msg, done func(error)) {
	st, err := w.parseStep(msg)
	if err != nil {
		done(err)
		return
	}
	w.runner.Start(stepContext(ctx, msg), st, func(err error) { done(stepError(err)) })
}

// parseStep reads a main-turn step, or says why it is a dead letter.
func (w *Worker) parseStep(msg jetstream.Msg) (*protocol.Step, error) {
	st, err := protocol.ParseStep(protocol.PrefixCall, msg.Subject(), msg.Data(), w.cfg.MaxStepBytes)
	if err != nil {
		return nil, &bus.DeadLetter{Reason: err.Error()}
	}
	if st.Context.Kind != protocol.KindText {
		return nil, &bus.DeadLetter{Reason: fmt.Sprintf("%v: context.kind %q on %s; task turns go to %s", protocol.ErrMalformed, st.Context.Kind, protocol.PrefixCall, protocol.PrefixTask)}
	}
	st.Context.Bindings = w.bindings.share(st.Context.Bindings)
	return st, nil
}

// stepContext is the context of handling msg: the gateway's trace, and
// whether the server delivered the step before (turn.Redelivered).
func stepContext(ctx context.Context, msg jetstream.Msg) context.Context {
	ctx = traceheader.Extract(ctx, msg.Headers())
	if md, err := msg.Metadata(); err != nil || md.NumDelivered > 1 {
		ctx = turn.Redelivered(ctx)
	}
	return ctx
}

// stepError turns the errors that would fail the same way on every
// delivery into dead letters with their reason: a step refused as
// malformed once it was parsed (too many calls for one step.done), and an
// event refused for its size even clipped. Delivering those again would
// only run the step again and fail again.
func stepError(err error) error {
	if err == nil {
		return nil // before dl, which errors.As moves to the heap
	}
	var dl *bus.DeadLetter
	switch {
	case errors.As(err, &dl):
		return err
	case errors.Is(err, protocol.ErrMalformed) || bus.TooLarge(err):
		return &bus.DeadLetter{Reason: err.Error()}
	}
	return err
}

func (w *Worker) handleTaskStep(ctx context.Context, msg jetstream.Msg) error {
	st, err := protocol.ParseStep(protocol.PrefixTask, msg.Subject(), msg.Data(), w.cfg.MaxStepBytes)
	if err != nil {
		return &bus.DeadLetter{Reason: err.Error()}
	}
	if st.Context.Kind != protocol.KindWorkflowTask || st.Context.WorkflowID == "" || st.Context.TaskID == "" {
		return &bus.DeadLetter{Reason: fmt.Sprintf("%v: a task turn step needs context.kind %q with workflow_id and task_id", protocol.ErrMalformed, protocol.KindWorkflowTask)}
	}
	return stepError(w.tasks.Run(stepContext(ctx, msg), w.taskRunner, st))
}

// taskMeter counts task verdicts as their step.done is published.
type taskMeter struct {
	turn.Emitter
	m *telemetry.Metrics
}

func (t taskMeter) StepDone(ctx context.Context, ev *protocol.StepDone) error {
	err := t.Emitter.StepDone(ctx, ev)
	if ev.Task != nil && err == nil {
		t.m.TaskOutcome(ev.Task.Status)
	}
	return err
}

// Catalog answers a turn.tools request.
func (w *Worker) Catalog(ctx context.Context, req protocol.CatalogRequest) (*protocol.CatalogReply, error) {
	if req.Context.Kind == protocol.KindWorkflowTask {
		if w.tasks == nil {
			return nil, fmt.Errorf("%w: this worker serves no workflow task turns", catalog.ErrBadRequest)
		}
		return w.tasks.Catalog(ctx, req)
	}
	set, err := w.runner.Assembler.Assemble(ctx, turn.Env{AgentID: req.AgentID, TurnID: req.TurnID, Context: req.Context})
	if err != nil {
		return nil, err
	}
	tools, digest := set.Catalog()
	return &protocol.CatalogReply{Tools: tools, Digest: digest, Notes: set.Notes, Approval: w.runner.Approval.With(req.Context.Approval).Held(set),
		Hints: catalog.Hints(set)}, nil
}

// onCancel handles a turn.cancel message on the subscription's
// goroutine, without a round trip: the turn is remembered as cancelled
// here (steps that start read it), its running steps here are aborted,
// and its mark and note are queued for the cancel writer, a turn that ran
// here ahead of the others. A cancel for a turn that runs elsewhere costs
// two map lookups, so that no cancel waits behind another's writes.
// onStepCancel aborts one step's running calls here (turn.cancel.step),
// leaving the turn and its other steps alone.
func (w *Worker) onStepCancel(agentID, turnID string, step int64, reason string) {
	if w.cancels.CancelStep(agentID, turnID, step, reason) {
		w.log.Info("step cancelled; its running calls here are aborted", "agent_id", agentID, "turn_id", turnID, "step", step, "reason", reason)
	}
}

func (w *Worker) onCancel(agentID, turnID, reason string) {
	// Remembered before running steps are aborted (see
	// turn.Runner.Dispatch for why the order matters).
	w.state.Remember(agentID, turnID, reason)
	aborted := w.cancels.Cancel(agentID, turnID, reason)
	w.cancelWriter.Add(agentID, turnID, reason, aborted > 0)
	if aborted > 0 {
		w.log.Info("turn cancelled; its running steps here are aborted", "agent_id", agentID, "turn_id", turnID, "steps", aborted, "reason", reason)
		return
	}
	w.log.Debug("turn cancelled", "agent_id", agentID, "turn_id", turnID, "reason", reason)
}

// bindingsCache keeps one map for each set of bindings the steps come
// with, so that the steps in flight share it: a step's parsed bindings
// map (its context.bindings, some 250 bytes with its keys) is otherwise
// kept by the step until it ends, thousands of times over for the same
// few sets. Nothing writes a step's bindings once it is parsed (the
// Assembler hands each category its own copy).
//
// It holds at most maxSharedBindings sets of at most
// maxSharedBindingKeys keys each; other bindings stay the step's own.
type bindingsCache struct {
	mu   sync.RWMutex
	maps map[string]map[string]bool // by bindingsKey
}

const (
	maxSharedBindings    = 256
	maxSharedBindingKeys = 16
)

// share returns a map equal to b that the cache keeps, or b.
func (c *bindingsCache) share(b map[string]bool) map[string]bool {
	if len(b) == 0 || len(b) > maxSharedBindingKeys {
		return b
	}
	var buf [256]byte
	key, ok := bindingsKey(buf[:0], b)
	if !ok {
		return b
	}
	c.mu.RLock()
	m := c.maps[string(key)]
	c.mu.RUnlock()
	if m != nil {
		return m
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.maps[string(key)]; m != nil {
		return m
	}
	if len(c.maps) >= maxSharedBindings {
		return b
	}
	if c.maps == nil {
		c.maps = map[string]map[string]bool{}
	}
	c.maps[string(key)] = b
	return b
}

// bindingsKey appends the bindings in name order to dst, each name
// quoted (a name may hold any character) and followed by its value, and
// reports false when they do not fit dst's capacity.
func bindingsKey(dst []byte, b map[string]bool) ([]byte, bool) {
	var names [maxSharedBindingKeys]string
	n := 0
	for name := range b {
		names[n] = name
		n++
	}
	slices.Sort(names[:n])
	for _, name := range names[:n] {
		if len(dst)+len(name)*6+8 > cap(dst) {
			return dst, false
		}
		dst = strconv.AppendQuote(dst, name)
		if b[name] {
			dst = append(dst, '1')
		} else {
			dst = append(dst, '0')
		}
	}
	return dst, true
}
