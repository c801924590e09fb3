package telemetry

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Metrics are the worker's instruments. Every method is safe for
// concurrent use; a nil *Metrics records nothing.
type Metrics struct {
	steps       metric.Int64ObservableCounter
	calls       metric.Int64ObservableCounter
	repairs     metric.Int64Counter
	duration    metric.Float64Histogram
	inFlight    metric.Int64ObservableUpDownCounter
	redelivered metric.Int64Counter
	dead        metric.Int64Counter
	tasks       metric.Int64Counter
	running     atomic.Int64 // the calls in flight (turn_worker_calls_in_flight)
	meter       metric.Meter

	// The counts every step and call add to are the worker's own, read
	// at each collection: the SDK's synchronous Add normalised the
	// attribute set and looked for an exemplar on each of a call's four
	// measurements, about 3% of a no-op step's CPU (a worker profile
	// under load).
	stepCounts, callCounts counts
	sets                   setCache // the duration histogram's sets
}

// counts are one counter's series: a count per attribute set, added to
// with one atomic add once the set is known. It holds at most maxSeries
// sets (a tool name can come from an MCP server); past that, what would
// have been a new series is added to the overflow series
// (otel.metric.overflow=true), as the SDK's own cardinality limit does.
type counts struct {
	mu       sync.RWMutex
	series   map[setKey]*series
	overflow atomic.Int64
}

type series struct {
	attrs metric.MeasurementOption
	n     atomic.Int64
}

// maxSeries is well within the SDK's own cardinality limit (2,000 by
// default), which would otherwise fold some of these series into its
// overflow series at collection.
const maxSeries = 1024

var overflowAttrs = metric.WithAttributeSet(attribute.NewSet(attribute.Bool("otel.metric.overflow", true)))

func (c *counts) add(k setKey, build func() attribute.Set) {
	c.mu.RLock()
	s := c.series[k]
	c.mu.RUnlock()
	if s == nil {
		if s = c.make(k, build); s == nil {
			c.overflow.Add(1)
			return
		}
	}
	s.n.Add(1)
}

func (c *counts) make(k setKey, build func() attribute.Set) *series {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.series[k]; s != nil {
		return s
	}
	if len(c.series) >= maxSeries {
		return nil
	}
	if c.series == nil {
		c.series = map[setKey]*series{}
	}
	s := &series{attrs: metric.WithAttributeSet(build())}
	c.series[k] = s
	return s
}

func (c *counts) observe(o metric.Observer, inst metric.Int64Observable) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, s := range c.series {
		o.ObserveInt64(inst, s.n.Load(), s.attrs)
	}
	if n := c.overflow.Load(); n != 0 {
		o.ObserveInt64(inst, n, overflowAttrs)
	}
}

// setCache keeps the attribute sets of the measurements every step makes:
// building a set sorts and allocates, and was a twentieth of the worker's
// CPU under load. It holds at most maxCachedSets; past that (a tool name
// can come from the model), sets are built each time.
type setCache struct {
	mu   sync.RWMutex
	sets map[setKey]metric.MeasurementOption
}

type setKey struct{ instrument, a, b, c string }

const maxCachedSets = 1024

func (c *setCache) get(k setKey, build func() attribute.Set) metric.MeasurementOption {
	c.mu.RLock()
	o, ok := c.sets[k]
	c.mu.RUnlock()
	if ok {
		return o
	}
	o = metric.WithAttributeSet(build())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sets == nil {
		c.sets = map[setKey]metric.MeasurementOption{}
	}
	if len(c.sets) < maxCachedSets {
		c.sets[k] = o
	}
	return o
}

func newMetrics(m metric.Meter) (*Metrics, error) {
	x := &Metrics{meter: m}
	var errs [9]error
	x.steps, errs[0] = m.Int64ObservableCounter("turn_worker_steps", metric.WithDescription("Steps handled, by stream and result (done, dead_letter, retry, abandoned)."))
	x.calls, errs[1] = m.Int64ObservableCounter("turn_worker_calls", metric.WithDescription("Calls ended, by tool, status and error kind."))
	x.repairs, errs[2] = m.Int64Counter("turn_worker_repairs", metric.WithDescription("Repair-ladder rungs that made arguments parse, by rung."))
	x.duration, errs[3] = m.Float64Histogram("turn_worker_call_duration_seconds", metric.WithUnit("s"), metric.WithDescription("How long tools ran, by tool."))
	x.inFlight, errs[4] = m.Int64ObservableUpDownCounter("turn_worker_calls_in_flight", metric.WithDescription("Calls whose tools are running now."))
	x.redelivered, errs[5] = m.Int64Counter("turn_worker_redeliveries", metric.WithDescription("Steps received again after an earlier delivery, by stream."))
	x.dead, errs[6] = m.Int64Counter("turn_worker_dead_letters", metric.WithDescription("Steps copied to TURN_DEAD, by stream and reason (malformed, delivery_limit)."))
	x.tasks, errs[7] = m.Int64Counter("turn_worker_task_outcomes", metric.WithDescription("Workflow task-turn verdicts, by status."))
	if err := errors.Join(errs[:8]...); err != nil {
		return nil, err
	}
	_, errs[8] = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		x.stepCounts.observe(o, x.steps)
		x.callCounts.observe(o, x.calls)
		o.ObserveInt64(x.inFlight, x.running.Load())
		return nil
	}, x.steps, x.calls, x.inFlight)
	return x, errs[8]
}

var bg = context.Background()

// Hooks are the turn hooks that count calls (turn.Runner.Hooks): the
// calls running now, and each call's end, but for outcomes replayed from
// the journal, counted when they first ended. A nil *Metrics has none.
func (m *Metrics) Hooks() *turn.Hooks {
	if m == nil {
		return nil
	}
	return &turn.Hooks{Started: m.callStarted, Ended: func(_ turn.JournalRef, o *turn.Outcome) {
		if !o.Replayed {
			m.callEnded(o)
		}
	}}
}

func (m *Metrics) callStarted(turn.JournalRef, protocol.CallItem, string) {
	m.running.Add(1)
}

// Running is the number of calls whose tools are running now.
func (m *Metrics) Running() int64 {
	if m == nil {
		return 0
	}
	return m.running.Load()
}

// UnknownToolLabel is the tool label of calls to a tool the turn does
// not have.
const UnknownToolLabel = "(unknown)"

// callEnded counts a call's end.
func (m *Metrics) callEnded(o *turn.Outcome) {
	name := turn.ToolKey(o.Namespace, o.Name)
	kind := ""
	if o.Err != nil {
		kind = string(o.Err.Kind)
		if o.Err.Kind == tool.UnknownTool {
			// The name is the model's, any text of any size: one series
			// per made-up name would grow without bound.
			name = UnknownToolLabel
		}
	}
	status := o.Status()
	m.callCounts.add(setKey{"calls", name, status, kind}, func() attribute.Set {
		if kind == "" { // a success has no error kind, not an empty one
			return attribute.NewSet(attribute.String("tool", name), attribute.String("status", status))
		}
		return attribute.NewSet(attribute.String("tool", name), attribute.String("status", status), attribute.String("error_kind", kind))
	})
	for _, r := range o.Repairs() {
		m.repairs.Add(bg, 1, attrs(attribute.String("rung", r)))
	}
	if o.Ran {
		m.running.Add(-1)
		m.duration.Record(bg, o.Duration.Seconds(), m.sets.get(setKey{instrument: "duration", a: name}, func() attribute.Set {
			return attribute.NewSet(attribute.String("tool", name))
		}))
	}
}

// Step implements bus.StepMeter: a step's result, and whether it was a
// redelivery.
func (m *Metrics) Step(stream, result string, attempt uint64) {
	if m == nil {
		return
	}
	m.stepCounts.add(setKey{instrument: "steps", a: stream, b: result}, func() attribute.Set {
		return attribute.NewSet(attribute.String("stream", stream), attribute.String("result", result))
	})
	if attempt > 1 {
		m.redelivered.Add(bg, 1, attrs(attribute.String("stream", stream)))
	}
}

// DeadLetter implements bus.StepMeter.
func (m *Metrics) DeadLetter(stream, reason string) {
	if m == nil {
		return
	}
	class := "malformed"
	if strings.HasPrefix(reason, "delivery limit") {
		class = "delivery_limit"
	}
	m.dead.Add(bg, 1, attrs(attribute.String("stream", stream), attribute.String("reason", class)))
}

// TaskOutcome counts a task-turn verdict.
func (m *Metrics) TaskOutcome(status string) {
	if m == nil {
		return
	}
	m.tasks.Add(bg, 1, attrs(attribute.String("status", status)))
}

// FairKey is one fairness key's steps on a work stream: running on this
// worker, held by its intake for their turn, and waiting in the fleet's
// backlog.
type FairKey struct {
	Stream, Key             string
	InFlight, Held, Backlog int64
}

// ObserveFair registers the fair-share gauges turn_worker_fair_in_flight,
// turn_worker_fair_held and turn_worker_fair_backlog, by stream and key, read at each
// collection. read bounds the keys (the busiest few, the rest summed
// under one key) so that the label cardinality stays bounded.
func (m *Metrics) ObserveFair(read func(context.Context) []FairKey) error {
	if m == nil {
		return nil
	}
	inFlight, err := m.meter.Int64ObservableGauge("turn_worker_fair_in_flight", metric.WithDescription("Steps running on this worker, by stream and fairness key (the busiest keys; the rest under _other)."))
	if err != nil {
		return err
	}
	held, err := m.meter.Int64ObservableGauge("turn_worker_fair_held", metric.WithDescription("Steps queued on this worker for their fairness key's turn, unacknowledged (the busiest keys; the rest under _other)."))
	if err != nil {
		return err
	}
	backlog, err := m.meter.Int64ObservableGauge("turn_worker_fair_backlog", metric.WithDescription("Steps waiting in TURN_BACKLOG for their share, by stream and fairness key (the busiest keys; the rest under _other); the same on every worker."))
	if err != nil {
		return err
	}
	_, err = m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for _, k := range read(ctx) {
			attrs := metric.WithAttributes(attribute.String("stream", k.Stream), attribute.String("key", k.Key))
			o.ObserveInt64(inFlight, k.InFlight, attrs)
			o.ObserveInt64(held, k.Held, attrs)
			o.ObserveInt64(backlog, k.Backlog, attrs)
		}
		return nil
	}, inFlight, held, backlog)
	return err
}
