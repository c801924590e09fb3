package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
)

// Topology is the layout a run uses, and the one its worker processes are
// started with: every stream, consumer and bucket with min(3, nodes)
// replicas.
func Topology(nodes int) bus.Topology {
	return bus.Topology{Replicas: min(3, nodes), AckWait: workerAckWait, MaxDeliver: workerMaxDeliver}.WithDefaults()
}

// Run runs the proof: it sets up the streams, starts the worker
// processes, publishes under faults, waits for every step, reads back
// what is stored and checks it. The error is for a run that could not be
// carried out (the cluster or the workers would not come up); what the
// run found, violations included, is in the report, which is returned
// whenever there is one.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	begin := time.Now()
	log := cfg.Logger
	rep := &Report{Faults: map[Fault]int{}, LogDir: filepath.Join(cfg.Dir, "logs")}
	defer func() { rep.Duration = time.Since(begin) }()
	nc, err := cfg.Cluster.Dial(nats.Name("chaos-gateway"), nats.ReconnectBufSize(64<<20))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	topo := Topology(len(cfg.Cluster.Nodes))
	setupStart := time.Now()
	if err := retry(ctx, 3*time.Minute, time.Minute, func(ctx context.Context) error { return bus.Setup(ctx, js, topo) }); err != nil {
		return nil, fmt.Errorf("setting up streams and buckets: %w", err)
	}
	log.Info("streams, consumers and buckets set up", "replicas", topo.Replicas, "took", time.Since(setupStart).Round(time.Millisecond))

	fl := newFleet(cfg.WorkerBin, cfg.Cluster.URL(), cfg.Dir, topo.Replicas, cfg.Workers, log)
	defer fl.stop()
	// The first process creates what the worker needs beyond what Setup
	// made (which can take a while on a slow machine: a process that
	// runs out of time exits and is started again); the others then find
	// it all in place.
	for slot := range cfg.Workers {
		if err := fl.start(slot); err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err = waitForInstances(wctx, nc, slot+1)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w (worker logs in %s)%s", err, rep.LogDir, fl.lastLog(5))
		}
	}
	startExits := fl.unexpectedExits()
	log.Info("worker processes running", "workers", cfg.Workers, "exits_at_start", startExits)

	g := newGateway(cfg, nc, js)
	if err := g.follow(ctx); err != nil {
		return nil, err
	}
	defer g.stopFollowing()
	// runCtx ends when the run is over, or with errStalled when nothing
	// has progressed for StallTimeout.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopRun(nil)
	wg.Go(func() { g.publishTasks(runCtx) })
	wg.Go(func() { g.watch(runCtx, stopRun) })

	// Faults run beside the publishing, one at a time.
	in := &injector{cfg: cfg, cluster: cfg.Cluster, fleet: fl}
	var faultErr error
	var faultMu sync.Mutex
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		err := injectFaults(runCtx, cfg, g, in, func(f Fault) {
			faultMu.Lock()
			rep.Faults[f]++
			faultMu.Unlock()
		})
		faultMu.Lock()
		faultErr = err
		faultMu.Unlock()
	}()

	pubErr := g.publishMain(runCtx)
	s := g.snapshot()
	log.Info("publishing done", "main_steps", s.mainPub, "done", s.mainDone, "tasks", s.tasks)
	<-faultsDone
	faultMu.Lock()
	err = faultErr
	faultMu.Unlock()
	stalled := errors.Is(context.Cause(runCtx), errStalled)
	if err != nil && ctx.Err() == nil && !stalled {
		return rep, fmt.Errorf("injecting faults: %w", err)
	}
	if pubErr != nil && ctx.Err() == nil && !stalled {
		return rep, pubErr
	}
	if !stalled {
		g.waitDone(runCtx)
	}
	rep.Stalled = errors.Is(context.Cause(runCtx), errStalled)
	stopRun(nil)
	wg.Wait()
	g.stopFollowing()
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	// Let redeliveries still in flight land before reading back.
	time.Sleep(time.Second)

	ev, err := collect(ctx, js, g, fl, cfg.Agent)
	if err != nil {
		return rep, err
	}
	check(ev, rep)
	rep.WorkerExits = fl.unexpectedExits() - startExits
	rep.PublishRetries = g.snapshot().retries
	return rep, nil
}

// injectFaults runs the plan: every FaultEvery until the publishing ends,
// or, with FaultEvery zero, each fault once its share of the steps is
// published (all of them, even if the publishing ends first).
func injectFaults(ctx context.Context, cfg Config, g *gateway, in *injector, count func(Fault)) error {
	defer g.faultsOver.Store(true)
	if len(cfg.Faults) == 0 {
		return nil
	}
	publishing := g.publishing
	for i := 0; ; i++ {
		f := cfg.Faults[i%len(cfg.Faults)]
		if cfg.FaultEvery > 0 {
			for wait := time.Now().Add(cfg.FaultEvery); time.Now().Before(wait); {
				if !publishing() {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(100 * time.Millisecond):
				}
			}
		} else {
			if i >= len(cfg.Faults) {
				return nil
			}
			at := int64(faultShare(cfg, i))
			for g.pubCount.Load() < at && publishing() {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		s := g.snapshot()
		start := time.Now()
		g.faultsBegun.Add(1)
		what, err := in.inject(ctx, f)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		count(f)
		cfg.Logger.Info("fault injected", "kind", string(f), "what", what, "took", time.Since(start).Round(time.Millisecond),
			"published", s.mainPub, "done", s.mainDone)
	}
}

// waitDone waits until every published step has its step.done, every
// announced task's turn has ended and the workflow events are all read,
// or ctx ends (watch ends it when the run stalls).
func (g *gateway) waitDone(ctx context.Context) {
	lastLog := time.Now()
	for {
		s := g.snapshot()
		if s.publishDone && s.outstanding == 0 && s.queued == 0 && s.tasksOpen == 0 && g.eventsRead(ctx, s.lastEvent) {
			return
		}
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			g.log.Info("waiting for outstanding steps", "outstanding", s.outstanding, "tasks_open", s.tasksOpen, "queued", s.queued,
				"examples", s.examples, "work_queues", g.workQueues(ctx))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// workQueues describes the work consumers, for the log.
func (g *gateway) workQueues(ctx context.Context) string {
	var out []string
	for _, sc := range [][2]string{{protocol.StreamCalls, protocol.ConsumerCalls}, {protocol.StreamTasks, protocol.ConsumerTasks}} {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := g.js.Consumer(actx, sc[0], sc[1])
		cancel()
		if err != nil {
			out = append(out, sc[1]+": "+err.Error())
			continue
		}
		i := c.CachedInfo()
		out = append(out, fmt.Sprintf("%s: pending %d, ack pending %d, redelivered %d, leader %s", sc[1], i.NumPending, i.NumAckPending, i.NumRedelivered, i.Cluster.Leader))
	}
	return strings.Join(out, "; ")
}

// eventsRead reports whether the live consumer has read every workflow
// event stored.
func (g *gateway) eventsRead(ctx context.Context, last uint64) bool {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := g.js.Stream(actx, protocol.StreamWorkflows)
	if err != nil {
		return false
	}
	return s.CachedInfo().State.LastSeq <= last
}

// collect reads back everything the checks need.
func collect(ctx context.Context, js jetstream.JetStream, g *gateway, fl *fleet, agent string) (*evidence, error) {
	ev := &evidence{published: g.publishedSteps(), records: map[string]taskRecord{}}
	err := readAll(ctx, js, protocol.StreamOutputs, protocol.PrefixOutput+"."+agent+".>", func(data []byte) error {
		var e outputEvent
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("unreadable event %q: %w", data, err)
		}
		ev.outputs = append(ev.outputs, e)
		return nil
	}, func() { ev.outputs = nil })
	if err != nil {
		return nil, err
	}
	err = readAll(ctx, js, protocol.StreamWorkflows, protocol.PrefixWFEvt+".>", func(data []byte) error {
		var e protocol.WorkflowEvent
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("unreadable workflow event %q: %w", data, err)
		}
		if e.AgentID == agent {
			ev.events = append(ev.events, e)
		}
		return nil
	}, func() { ev.events = nil })
	if err != nil {
		return nil, err
	}
	err = readAll(ctx, js, protocol.StreamDead, protocol.PrefixDead+"."+agent+".>", func(data []byte) error {
		var st struct {
			TurnID string `json:"turn_id"`
			Step   int64  `json:"step"`
		}
		_ = json.Unmarshal(data, &st)
		ev.dead = append(ev.dead, stepKey{Turn: st.TurnID, Step: st.Step})
		return nil
	}, func() { ev.dead = nil })
	if err != nil {
		return nil, err
	}
	for _, name := range []string{protocol.StreamCalls, protocol.StreamTasks} {
		err := retry(ctx, time.Minute, 5*time.Second, func(ctx context.Context) error {
			s, err := js.Stream(ctx, name)
			if err == nil {
				ev.leftover += int(s.CachedInfo().State.Msgs)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	var kv jetstream.KeyValue
	if err := retry(ctx, time.Minute, 5*time.Second, func(ctx context.Context) (err error) {
		kv, err = js.KeyValue(ctx, protocol.BucketWorkflows)
		return err
	}); err != nil {
		return nil, err
	}
	for tk, ids := range acceptedTasks(ev.outputs) {
		rec, err := readTask(ctx, kv, ids[0], ids[1])
		if err != nil {
			return nil, err
		}
		ev.records[tk] = rec
	}
	marks, err := fl.marks()
	if err != nil {
		return nil, err
	}
	ev.marks = marks
	return ev, nil
}

// readTask reads a task record. A record that is missing or not yet
// accepted is read again a few times: a read may be served by a replica
// that is behind.
func readTask(ctx context.Context, kv jetstream.KeyValue, workflow, task string) (taskRecord, error) {
	var rec taskRecord
	for attempt := range 5 {
		err := retry(ctx, time.Minute, 5*time.Second, func(ctx context.Context) error {
			e, err := kv.Get(ctx, workflowtask.TaskKey(workflow, task))
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				rec = taskRecord{}
				return nil
			}
			if err != nil {
				return err
			}
			var t workflowtask.Task
			if err := json.Unmarshal(e.Value(), &t); err != nil {
				return fmt.Errorf("task record %s/%s is unreadable: %w", workflow, task, err)
			}
			rec = taskRecord{Found: true, Status: t.Status, Result: t.Result}
			return nil
		})
		if err != nil {
			return rec, err
		}
		if rec.Found && rec.Status == workflowtask.TaskAccepted {
			break
		}
		sleep(ctx, time.Duration(attempt+1)*200*time.Millisecond)
	}
	return rec, nil
}

// readAll reads every message of a stream on filter, in order. On a
// failure it starts again from the beginning (after reset), so a
// restart of the consumer cannot skip or repeat a message. It keeps
// trying for two minutes: on a busy machine a stream that a fault left
// without a leader can take that long to elect one.
func readAll(ctx context.Context, js jetstream.JetStream, stream, filter string, fn func([]byte) error, reset func()) error {
	var last error
	for attempt, deadline := 0, time.Now().Add(2*time.Minute); attempt == 0 || time.Now().Before(deadline); attempt++ {
		if attempt > 0 {
			reset()
			sleep(ctx, time.Second)
		}
		err := readOnce(ctx, js, stream, filter, fn)
		if err == nil {
			return nil
		}
		var permanent *permanentErr
		if errors.As(err, &permanent) || ctx.Err() != nil {
			return err
		}
		last = err
	}
	return fmt.Errorf("reading %s: %w", stream, last)
}

type permanentErr struct{ error }

func readOnce(ctx context.Context, js jetstream.JetStream, stream, filter string, fn func([]byte) error) error {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := js.OrderedConsumer(actx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		cancel()
		return err
	}
	info, err := c.Info(actx)
	cancel()
	if err != nil {
		return err
	}
	pending := info.NumPending
	for got := uint64(0); got < pending; {
		batch, err := c.Fetch(int(min(pending-got, 1000)), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if err := fn(m.Data()); err != nil {
				return &permanentErr{err}
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if n == 0 {
			return fmt.Errorf("read %d of %d messages of %s, then none", got, pending, stream)
		}
		got += uint64(n)
	}
	return nil
}

// retry calls fn with a deadline of attempt each time until it succeeds
// or d has passed: a JetStream request sent while the client reconnects,
// or while a stream has no leader, can go unanswered.
func retry(ctx context.Context, d, attempt time.Duration, fn func(context.Context) error) error {
	deadline := time.Now().Add(d)
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := fn(actx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) || errors.Is(err, bus.ErrIncompatible) || strings.Contains(err.Error(), "unreadable") {
			return err
		}
		sleep(ctx, 250*time.Millisecond)
	}
}
