package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
)

// stepKey names a step.
type stepKey struct {
	Turn string
	Step int64
}

func (k stepKey) String() string { return fmt.Sprintf("%s/%d", k.Turn, k.Step) }

// callSpec is one call of a published step. Label is the mark's label or
// the workflow's title: what identifies the body's effect.
type callSpec struct {
	ID, Name, Label string
	// Tasks is the number of tasks a start_workflow gives.
	Tasks int
}

// taskRef is the task a task-turn step works on, and the result it
// submits.
type taskRef struct {
	Workflow, Task, Turn string
	Result               json.RawMessage
}

// stepSpec is a published step.
type stepSpec struct {
	Key   stepKey
	Task  *taskRef // nil in a main turn
	Calls []callSpec
	// Fair is a main step's fairness key ("" for the default).
	Fair string
}

// resultSchema is every task's result schema.
var resultSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`)

// taskState is the gateway's view of one task turn.
type taskState struct {
	ref   *taskRef
	last  int64 // the last step published (or queued)
	ended bool  // a step.done said accepted or failed
	gave  bool  // maxTaskSteps steps without an end
}

// gateway plays the gateway: it publishes main-turn steps, follows the
// outputs and workflow events live, and runs every announced task's turn.
type gateway struct {
	cfg Config
	nc  *nats.Conn
	js  jetstream.JetStream
	log *slog.Logger

	slots chan struct{} // main-turn steps in flight

	mu             sync.Mutex
	published      map[stepKey]*stepSpec
	done           map[stepKey]bool // seen live
	tasks          map[string]*taskState
	queue          []*stepSpec // task steps to publish
	queued         chan struct{}
	taskPublishing int // task steps being published now
	lastOutput     uint64
	lastEvent      uint64
	progress       time.Time // last time anything new was seen
	mainDone       int
	mainPub        int
	floodPub       int // main steps of the flooding key
	taskPub        int
	retries        int
	publishDone    bool

	outputs, events jetstream.ConsumeContext
	consumersMu     sync.Mutex
	pubCount        atomic.Int64 // main steps published, for the fault plan
	faultsBegun     atomic.Int64 // faults begun, for HoldForFaults
	faultsOver      atomic.Bool  // no fault will begin any more
}

func newGateway(cfg Config, nc *nats.Conn, js jetstream.JetStream) *gateway {
	return &gateway{
		cfg: cfg, nc: nc, js: js, log: cfg.Logger,
		slots:     make(chan struct{}, cfg.Concurrency),
		published: map[stepKey]*stepSpec{}, done: map[stepKey]bool{}, tasks: map[string]*taskState{},
		queued: make(chan struct{}, 1), progress: time.Now(),
	}
}

// mainStep builds main-turn step i: a ping and a mark, or, every
// WorkflowEvery steps, a start_workflow and a ping.
func (g *gateway) mainStep(i int) (*stepSpec, map[string]any) {
	key := stepKey{Turn: fmt.Sprintf("t%06d", i/stepsPerTurn), Step: int64(i % stepsPerTurn)}
	label := fmt.Sprintf("%s.%s.%d", g.cfg.Agent, key.Turn, key.Step)
	spec := &stepSpec{Key: key}
	var output []any
	fc := func(id, name string, args any) {
		a, _ := json.Marshal(args)
		output = append(output, map[string]any{"type": "function_call", "call_id": id, "name": name, "arguments": string(a)})
	}
	if g.cfg.WorkflowEvery > 0 && i%g.cfg.WorkflowEvery == g.cfg.WorkflowEvery-1 {
		tasks := make([]any, g.cfg.TasksPerWorkflow)
		for j := range tasks {
			tasks[j] = map[string]any{"id": fmt.Sprintf("k%d", j), "instructions": "Answer with the task turn's id.", "result_schema": resultSchema}
		}
		fc("w", workflowtask.StartWorkflowName, map[string]any{"title": label, "tasks": tasks})
		fc("p", "ping", map[string]any{"note": label})
		spec.Calls = []callSpec{{ID: "w", Name: workflowtask.StartWorkflowName, Label: label, Tasks: len(tasks)}, {ID: "p", Name: "ping"}}
	} else {
		fc("p", "ping", map[string]any{"note": label})
		fc("m", "mark", map[string]any{"label": label, "ms": g.cfg.MarkMS})
		spec.Calls = []callSpec{{ID: "p", Name: "ping"}, {ID: "m", Name: "mark", Label: label}}
	}
	tc := map[string]any{"kind": protocol.KindText, "bindings": map[string]any{diagnostics.Binding: true}}
	if spec.Fair = g.fairKey(i / stepsPerTurn); spec.Fair != "" {
		tc["fairness"] = map[string]any{"key": spec.Fair}
	}
	body := map[string]any{
		"agent_id": g.cfg.Agent, "turn_id": key.Turn, "step": key.Step,
		"context": tc,
		"output":  output,
	}
	return spec, body
}

// fairKey is the fairness key of main turn n: the flooding key for
// FloodPercent of the turns, else one of the quiet keys ("" with the
// flood off).
func (g *gateway) fairKey(n int) string {
	if g.cfg.NoFlood {
		return ""
	}
	if n%5 != 0 { // 4 turns in 5
		return FloodKey
	}
	return fmt.Sprintf("%s%d", QuietKey, n/5%QuietKeys)
}

// taskStep builds step n of a task's turn: one submit_result.
func (g *gateway) taskStep(ref *taskRef, n int64) (*stepSpec, map[string]any) {
	key := stepKey{Turn: ref.Turn, Step: n}
	id := fmt.Sprintf("s%d", n)
	args, _ := json.Marshal(map[string]any{"result": ref.Result})
	body := map[string]any{
		"agent_id": g.cfg.Agent, "turn_id": ref.Turn, "step": n,
		"context": map[string]any{"kind": protocol.KindWorkflowTask, "workflow_id": ref.Workflow, "task_id": ref.Task},
		"output":  []any{map[string]any{"type": "function_call", "call_id": id, "name": workflowtask.SubmitResultName, "arguments": string(args)}},
	}
	return &stepSpec{Key: key, Task: ref, Calls: []callSpec{{ID: id, Name: workflowtask.SubmitResultName}}}, body
}

// publish stores a step in its stream under the protocol's message id,
// trying again (the id makes that harmless) until it is confirmed or ctx
// ends. The step is recorded as published first, so that its step.done
// is expected however fast it comes.
func (g *gateway) publish(ctx context.Context, spec *stepSpec, body map[string]any) error {
	prefix := protocol.PrefixCall
	if spec.Task != nil {
		prefix = protocol.PrefixTask
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	m := nats.NewMsg(protocol.Subject(prefix, g.cfg.Agent, spec.Key.Turn))
	m.Data = data
	m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID(g.cfg.Agent, spec.Key.Turn, spec.Key.Step))
	g.mu.Lock()
	g.published[spec.Key] = spec
	g.mu.Unlock()
	delay := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := g.js.PublishMsg(actx, m)
		cancel()
		if err == nil {
			g.mu.Lock()
			if spec.Task != nil {
				g.taskPub++
			} else {
				g.mainPub++
				if spec.Fair == FloodKey {
					g.floodPub++
				}
			}
			g.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil {
			// Never confirmed: it may or may not be stored, so it is
			// neither expected nor unexpected.
			g.mu.Lock()
			delete(g.published, spec.Key)
			g.mu.Unlock()
			return fmt.Errorf("publishing %s: %w", spec.Key, context.Cause(ctx))
		}
		g.mu.Lock()
		g.retries++
		g.mu.Unlock()
		if attempt%20 == 5 {
			g.log.Warn("publishing a step keeps failing; retrying", "step", spec.Key.String(), "attempt", attempt, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// publishMain publishes the main-turn steps: Steps of them, or for
// Duration, at most Concurrency of them not yet done, at most Rate a
// second.
func (g *gateway) publishMain(ctx context.Context) error {
	defer func() {
		g.mu.Lock()
		g.publishDone = true
		g.mu.Unlock()
	}()
	start := time.Now()
	for i := 0; ; i++ {
		if g.cfg.Steps > 0 && i >= g.cfg.Steps || g.cfg.Duration > 0 && time.Since(start) >= g.cfg.Duration {
			return nil
		}
		if g.cfg.Rate > 0 {
			at := start.Add(time.Duration(float64(i) / g.cfg.Rate * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(d):
				}
			}
		}
		if err := g.holdForFault(ctx, i); err != nil {
			return err
		}
		select {
		case g.slots <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		spec, body := g.mainStep(i)
		if err := g.publish(ctx, spec, body); err != nil {
			return err
		}
		g.pubCount.Add(1)
	}
}

// faultShare is the number of main-turn steps published before fault i
// of a plan spread over Steps begins.
func faultShare(cfg Config, i int) int {
	return (i + 1) * cfg.Steps / (len(cfg.Faults) + 1)
}

// holdForFault, with HoldForFaults, waits before main-turn step i while a
// fault whose share is i or less has not begun yet.
func (g *gateway) holdForFault(ctx context.Context, i int) error {
	if !g.cfg.HoldForFaults || g.cfg.FaultEvery > 0 || g.cfg.Steps <= 0 {
		return nil
	}
	for {
		k := int(g.faultsBegun.Load())
		if k >= len(g.cfg.Faults) || i < faultShare(g.cfg, k) || g.faultsOver.Load() {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// publishTasks publishes queued task-turn steps until ctx ends.
func (g *gateway) publishTasks(ctx context.Context) {
	for {
		g.mu.Lock()
		var spec *stepSpec
		if len(g.queue) > 0 {
			spec, g.queue = g.queue[0], g.queue[1:]
			g.taskPublishing++
		}
		g.mu.Unlock()
		if spec == nil {
			select {
			case <-ctx.Done():
				return
			case <-g.queued:
				continue
			}
		}
		_, body := g.taskStep(spec.Task, spec.Key.Step)
		err := g.publish(ctx, spec, body)
		g.mu.Lock()
		g.taskPublishing--
		g.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// enqueue queues a task step; the caller holds g.mu.
func (g *gateway) enqueue(ref *taskRef, n int64) {
	spec, _ := g.taskStep(ref, n)
	g.queue = append(g.queue, spec)
	select {
	case g.queued <- struct{}{}:
	default:
	}
}

// liveEvent is what the gateway reads of an output event as it arrives.
type liveEvent struct {
	Type   string `json:"type"`
	TurnID string `json:"turn_id"`
	Step   int64  `json:"step"`
	Task   *struct {
		Status string `json:"status"`
	} `json:"task"`
}

// follow starts (or restarts, from where they left off) the live
// consumers of the outputs and the workflow events.
func (g *gateway) follow(ctx context.Context) error {
	g.consumersMu.Lock()
	defer g.consumersMu.Unlock()
	if g.outputs != nil {
		g.outputs.Stop()
	}
	if g.events != nil {
		g.events.Stop()
	}
	g.mu.Lock()
	fromOutput, fromEvent := g.lastOutput+1, g.lastEvent+1
	g.mu.Unlock()
	var err error
	g.outputs, err = g.consume(ctx, protocol.StreamOutputs, protocol.PrefixOutput+"."+g.cfg.Agent+".>", fromOutput, g.onOutput)
	if err != nil {
		return err
	}
	g.events, err = g.consume(ctx, protocol.StreamWorkflows, protocol.PrefixWFEvt+".>", fromEvent, g.onEvent)
	return err
}

func (g *gateway) consume(ctx context.Context, stream, filter string, from uint64, fn func(seq uint64, data []byte)) (jetstream.ConsumeContext, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from}
	var lastErr error
	for attempt := 0; attempt < 60; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := g.js.OrderedConsumer(actx, stream, cfg)
		cancel()
		if err == nil {
			var cc jetstream.ConsumeContext
			cc, err = c.Consume(func(m jetstream.Msg) {
				md, err := m.Metadata()
				if err != nil {
					return
				}
				fn(md.Sequence.Stream, m.Data())
			})
			if err == nil {
				return cc, nil
			}
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return nil, fmt.Errorf("following %s: %w", stream, lastErr)
}

func (g *gateway) onOutput(seq uint64, data []byte) {
	var ev liveEvent
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if seq <= g.lastOutput {
		return
	}
	g.lastOutput = seq
	if ev.Type != protocol.EventStepDone {
		return
	}
	key := stepKey{Turn: ev.TurnID, Step: ev.Step}
	spec, ok := g.published[key]
	if !ok || g.done[key] {
		return
	}
	g.done[key] = true
	g.progress = time.Now()
	if spec.Task == nil {
		g.mainDone++
		<-g.slots
		return
	}
	ts := g.tasks[key.Turn]
	if ts == nil || ts.ended || key.Step != ts.last {
		return
	}
	status := ""
	if ev.Task != nil {
		status = ev.Task.Status
	}
	switch {
	case status == protocol.VerdictAccepted || status == protocol.VerdictFailed:
		ts.ended = true
	case ts.last+1 >= maxTaskSteps:
		ts.gave = true
		g.log.Warn("task turn gave up", "turn", key.Turn, "status", status)
	default:
		// Not recorded (or rejected): submit again, as the model would.
		ts.last++
		g.enqueue(ts.ref, ts.last)
	}
}

// onEvent starts the turn of every task announced for this agent.
func (g *gateway) onEvent(seq uint64, data []byte) {
	var ev protocol.WorkflowEvent
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if seq <= g.lastEvent {
		return
	}
	g.lastEvent = seq
	g.progress = time.Now()
	if ev.Type != protocol.EventTaskReady || ev.AgentID != g.cfg.Agent || g.tasks[ev.TurnID] != nil {
		return
	}
	result, _ := json.Marshal(map[string]string{"answer": ev.TurnID})
	ref := &taskRef{Workflow: ev.WorkflowID, Task: ev.TaskID, Turn: ev.TurnID, Result: result}
	g.tasks[ev.TurnID] = &taskState{ref: ref}
	g.enqueue(ref, 0)
}

// stopFollowing stops the live consumers.
func (g *gateway) stopFollowing() {
	g.consumersMu.Lock()
	defer g.consumersMu.Unlock()
	if g.outputs != nil {
		g.outputs.Stop()
	}
	if g.events != nil {
		g.events.Stop()
	}
}

// publishing reports whether main-turn steps are still being published.
func (g *gateway) publishing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.publishDone
}

// watch restarts the live consumers when nothing has been seen for a
// while (an ordered consumer can lose its place when the node holding it
// restarts), and ends the run's context with errStalled when nothing has
// progressed for StallTimeout, until ctx ends.
func (g *gateway) watch(ctx context.Context, stall context.CancelCauseFunc) {
	lastFollow := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		s := g.snapshot()
		if s.outstanding == 0 && s.queued == 0 {
			continue
		}
		idle := time.Since(s.progress)
		if idle > g.cfg.StallTimeout {
			g.log.Warn("giving up on outstanding steps", "outstanding", s.outstanding, "examples", s.examples, "idle", idle.Round(time.Second))
			stall(errStalled)
			return
		}
		if idle > 15*time.Second && time.Since(lastFollow) > 15*time.Second {
			lastFollow = time.Now()
			if err := g.follow(ctx); err != nil {
				g.log.Warn("restarting the live consumers", "err", err)
			}
		}
	}
}

// errStalled ends a run in which nothing progressed for StallTimeout.
var errStalled = errors.New("nothing progressed for the stall timeout")

// snapshot is the gateway's live view.
type snapshot struct {
	mainPub, mainDone, taskPub, tasks, tasksOpen, queued, retries int
	outstanding                                                   int // published steps without a step.done yet
	examples                                                      []string
	publishDone                                                   bool
	lastEvent                                                     uint64
	progress                                                      time.Time
}

func (g *gateway) snapshot() snapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := snapshot{mainPub: g.mainPub, mainDone: g.mainDone, taskPub: g.taskPub, tasks: len(g.tasks), queued: len(g.queue) + g.taskPublishing,
		retries: g.retries, publishDone: g.publishDone, lastEvent: g.lastEvent, progress: g.progress}
	for k := range g.published {
		if !g.done[k] {
			s.outstanding++
			if len(s.examples) < 3 {
				s.examples = append(s.examples, k.String())
			}
		}
	}
	for _, ts := range g.tasks {
		if !ts.ended && !ts.gave {
			s.tasksOpen++
		}
	}
	return s
}

// publishedSteps is every step published, by key.
func (g *gateway) publishedSteps() map[stepKey]*stepSpec {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[stepKey]*stepSpec, len(g.published))
	for k, v := range g.published {
		out[k] = v
	}
	return out
}
