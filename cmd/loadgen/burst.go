package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/protocol"
)

// burstOptions are the burst mode's (--burst > 0): one agent publishes
// burst steps at once, each a sleep call of burstSleep; quiet agents send
// a ping step every quietEvery; then, with shares > 0, two tenants of the
// given weights flood shares steps each together.
type burstOptions struct {
	burst      int
	burstSleep time.Duration
	quiet      int
	quietEvery time.Duration
	idle       time.Duration
	shares     int
	weights    [2]float64
}

// burstReport is what a burst run measured.
type burstReport struct {
	IdleP50, IdleP99, BurstP50, BurstP99, BurstMax time.Duration
	// StoredP50 and StoredP99 are the quiet steps' publish to their
	// stream's acknowledgement during the burst: the server's part of the
	// latency, before any worker can see the step.
	StoredP50, StoredP99  time.Duration
	QuietIdle, QuietBurst int
	Drain                 time.Duration
	// Shares are the weighted tenants' fractions of the steps done while
	// both had steps waiting (zero without --shares).
	Shares [2]float64
	// Timeline is the quiet steps' stages during the burst (nil unless
	// the workers are in-process).
	Timeline *timelineReport
}

// stepWatch tells who waits for which step.done.
type stepWatch struct {
	mu    sync.Mutex
	start map[string]time.Time // subject of the step -> publish time
	done  map[string]func(time.Duration)
}

func (w *stepWatch) expect(subject string, t time.Time, done func(time.Duration)) {
	w.mu.Lock()
	w.start[subject], w.done[subject] = t, done
	w.mu.Unlock()
}

func runBurst(ctx context.Context, nc *nats.Conn, o options) (*burstReport, error) {
	b := o.burstOpts
	run := fmt.Sprintf("b%d", time.Now().UnixNano()%1e9)
	w := &stepWatch{start: map[string]time.Time{}, done: map[string]func(time.Duration){}}
	sub, err := nc.Subscribe(protocol.PrefixOutput+".>", func(m *nats.Msg) {
		t := strings.Split(m.Subject, ".")
		if len(t) != 5 || m.Header.Get(jetstream.MsgIDHeader) != protocol.StepDoneMsgID(t[3], t[4], 0) {
			return
		}
		key := t[3] + "." + t[4]
		w.mu.Lock()
		t0, ok := w.start[key]
		f := w.done[key]
		delete(w.start, key)
		delete(w.done, key)
		w.mu.Unlock()
		if ok {
			o.stages.mark(key, tlDone, time.Now())
			f(time.Since(t0))
		}
	})
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	acks := nc.NewInbox()
	var refused atomic.Pointer[error]
	var (
		storedMu sync.Mutex
		stored   []time.Duration
		storing  = map[string]time.Time{} // reply subject of a quiet step in the burst -> publish time
	)
	ackSub, err := nc.Subscribe(acks+".>", func(m *nats.Msg) {
		storedMu.Lock()
		if t0, ok := storing[m.Subject]; ok {
			o.stages.mark(strings.TrimPrefix(m.Subject, acks+"."), tlStored, time.Now())
			stored = append(stored, time.Since(t0))
			delete(storing, m.Subject)
		}
		storedMu.Unlock()
		if err := bus.PubAckError(m.Data); err != nil || len(m.Data) == 0 {
			if err == nil {
				err = fmt.Errorf("status %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
			}
			refused.CompareAndSwap(nil, &err)
		}
	})
	if err != nil {
		return nil, err
	}
	defer ackSub.Unsubscribe()
	_ = ackSub.SetPendingLimits(-1, -1)
	// The quiet agents publish on a connection of their own, as agents
	// behind other gateways do: on the burst's, each would wait behind the
	// burst's publishes in this program's socket before the server saw it.
	qc, err := nats.Connect(nc.ConnectedUrl(), nats.Name("loadgen-quiet"))
	if err != nil {
		return nil, err
	}
	defer qc.Close()
	publish := func(nc *nats.Conn, agent, turnID, call, args string, fair *protocol.Fairness, done func(time.Duration), timeStore bool) error {
		var extra map[string]any
		if fair != nil {
			extra = map[string]any{"fairness": fair}
		}
		m := stepMsg(agent, turnID, stepBody(agent, turnID, call, args, extra))
		m.Reply = acks + ".s"
		now := time.Now()
		if timeStore {
			m.Reply = acks + "." + agent + "." + turnID
			storedMu.Lock()
			storing[m.Reply] = now
			storedMu.Unlock()
		}
		if timeStore {
			o.stages.mark(agent+"."+turnID, tlPublished, now)
		}
		w.expect(agent+"."+turnID, now, done)
		return nc.PublishMsg(m)
	}
	sleepArgs := fmt.Sprintf(`{"ms":%d}`, b.burstSleep.Milliseconds())

	// Quiet agents ping throughout; each latency goes to the phase it
	// was published in.
	var (
		mu             sync.Mutex
		idle, inBurst  []time.Duration
		phase          atomic.Int32 // 0 idle, 1 burst, 2 over
		quietOutstand  sync.WaitGroup
		quietCtx, stop = context.WithCancel(ctx)
	)
	defer stop()
	var quietErr atomic.Pointer[error]
	var pingers sync.WaitGroup
	for q := range b.quiet {
		pingers.Go(func() {
			agent := fmt.Sprintf("quiet-%d", q)
			tick := time.NewTicker(b.quietEvery)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-quietCtx.Done():
					return
				case <-tick.C:
				}
				p := phase.Load()
				if p == 2 {
					return
				}
				quietOutstand.Add(1)
				err := publish(qc, agent, fmt.Sprintf("%s-%d", run, i), "ping", "{}", nil, func(d time.Duration) {
					mu.Lock()
					if p == 0 {
						idle = append(idle, d)
					} else {
						inBurst = append(inBurst, d)
					}
					mu.Unlock()
					quietOutstand.Done()
				}, p == 1)
				if err != nil {
					quietErr.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	if err := sleepCtx(ctx, b.idle); err != nil {
		return nil, err
	}
	// The burst: published as fast as the connection takes it.
	phase.Store(1)
	var burstLeft atomic.Int64
	burstLeft.Store(int64(b.burst))
	allDone := make(chan struct{})
	begin := time.Now()
	var last atomic.Int64
	for i := range b.burst {
		err := publish(nc, "burst", fmt.Sprintf("%s-%d", run, i), "sleep", sleepArgs, nil, func(time.Duration) {
			if burstLeft.Add(-1) == 0 {
				last.Store(int64(time.Since(begin)))
				close(allDone)
			}
		}, false)
		if err != nil {
			return nil, err
		}
	}
	if err := waitDone(ctx, allDone, &refused, func() int64 { return burstLeft.Load() }); err != nil {
		return nil, err
	}
	phase.Store(2)
	stop()
	pingers.Wait()
	if err := waitGroup(ctx, &quietOutstand); err != nil {
		return nil, err
	}
	if p := quietErr.Load(); p != nil {
		return nil, *p
	}
	rep := &burstReport{Drain: time.Duration(last.Load()), QuietIdle: len(idle), QuietBurst: len(inBurst)}
	rep.IdleP50, rep.IdleP99, _ = percentiles(idle)
	rep.BurstP50, rep.BurstP99, rep.BurstMax = percentiles(inBurst)
	storedMu.Lock()
	rep.StoredP50, rep.StoredP99, _ = percentiles(stored)
	storedMu.Unlock()
	rep.Timeline = o.stages.report()

	if b.shares > 0 {
		// Two tenants flood together; their steps done are counted until
		// either has only a tenth of its steps left to run (both still
		// have backlog then).
		var count [2]atomic.Int64
		var counting atomic.Bool
		counting.Store(true)
		left := [2]atomic.Int64{}
		left[0].Store(int64(b.shares))
		left[1].Store(int64(b.shares))
		tenantsDone := make(chan struct{})
		var both atomic.Int64
		both.Store(2)
		for i := range b.shares {
			for t := range 2 {
				fair := &protocol.Fairness{Key: fmt.Sprintf("tenant-%d", t), Weight: b.weights[t]}
				err := publish(nc, fmt.Sprintf("tenant-%d-agent", t), fmt.Sprintf("%s-s%d", run, i), "sleep", sleepArgs, fair, func(time.Duration) {
					if counting.Load() {
						count[t].Add(1)
					}
					n := left[t].Add(-1)
					if n <= int64(b.shares/10) {
						counting.Store(false)
					}
					if n == 0 && both.Add(-1) == 0 {
						close(tenantsDone)
					}
				}, false)
				if err != nil {
					return nil, err
				}
			}
		}
		if err := waitDone(ctx, tenantsDone, &refused, func() int64 { return left[0].Load() + left[1].Load() }); err != nil {
			return nil, err
		}
		a, c := float64(count[0].Load()), float64(count[1].Load())
		if a+c > 0 {
			rep.Shares = [2]float64{a / (a + c), c / (a + c)}
		}
	}
	return rep, nil
}

func (r *burstReport) print(o options) {
	b := o.burstOpts
	fmt.Fprintf(o.out, "burst=%d sleep=%s quiet=%d every=%s\n", b.burst, b.burstSleep, b.quiet, b.quietEvery)
	fmt.Fprintf(o.out, "quiet idle: n=%d p50=%s p99=%s\n", r.QuietIdle, r.IdleP50.Round(10*time.Microsecond), r.IdleP99.Round(10*time.Microsecond))
	fmt.Fprintf(o.out, "quiet during burst: n=%d p50=%s p99=%s max=%s\n", r.QuietBurst, r.BurstP50.Round(10*time.Microsecond), r.BurstP99.Round(10*time.Microsecond), r.BurstMax.Round(10*time.Microsecond))
	fmt.Fprintf(o.out, "quiet during burst, stored by the server (publish to its ack): p50=%s p99=%s\n", r.StoredP50.Round(10*time.Microsecond), r.StoredP99.Round(10*time.Microsecond))
	r.Timeline.print(o.out)
	fmt.Fprintf(o.out, "burst drained in %s\n", r.Drain.Round(time.Millisecond))
	if b.shares > 0 {
		fmt.Fprintf(o.out, "shares while both had backlog: weight %g -> %.3f, weight %g -> %.3f\n", b.weights[0], r.Shares[0], b.weights[1], r.Shares[1])
	}
}

func percentiles(d []time.Duration) (p50, p99, maxD time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	at := func(p float64) time.Duration { return d[min(len(d)-1, int(float64(len(d))*p))] }
	return at(0.5), at(0.99), d[len(d)-1]
}

// waitDone waits for done, failing when a publish was refused or nothing
// moved for a minute.
func waitDone(ctx context.Context, done <-chan struct{}, refused *atomic.Pointer[error], left func() int64) error {
	lastN, lastChange := int64(-1), time.Now()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if p := refused.Load(); p != nil {
			return fmt.Errorf("a step was not stored: %w", *p)
		}
		if n := left(); n != lastN {
			lastN, lastChange = n, time.Now()
		} else if time.Since(lastChange) > time.Minute {
			return fmt.Errorf("%d steps got no step.done, none for a minute", n)
		}
	}
}

func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		return errors.New("quiet steps got no step.done for a minute")
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
