package gateway

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/protocol"
)

// StepRun streams the events of one published step: its call outputs
// (and activity, with [WithActivity]), a step.pending when its calls
// wait for approval, and last its step.done. It is meant for one
// goroutine.
type StepRun struct {
	c     *Client
	step  *protocol.Step
	calls map[string]bool // the step's call ids

	in       chan inbound
	stop     chan struct{}
	stopOnce sync.Once
	cons     jetstream.ConsumeContext
	sub      *nats.Subscription

	// Duplicates are told by what they are about, never by Nats-Msg-Id:
	// an event stored past the stream's duplicate window can share the
	// id of another kind of event (the output of a call named "pending"
	// and its step.pending's).
	seenCall map[string]bool // call ids whose output was returned
	pending  bool
	done     *StepDone
}

type inbound struct {
	subject string
	data    []byte
}

func newRun(c *Client, st *protocol.Step) *StepRun {
	r := &StepRun{c: c, step: st, calls: map[string]bool{}, in: make(chan inbound, 64), stop: make(chan struct{}),
		seenCall: map[string]bool{}}
	for _, call := range st.Calls {
		r.calls[call.CallID] = true
	}
	return r
}

// subscribe reads the turn's output subject from stream sequence start
// on (an ordered consumer: no acks, no state on the server beyond it),
// and, when asked, the turn's activity subject.
func (r *StepRun) subscribe(cfg sendConfig, start uint64) error {
	if err := r.readFrom(start); err != nil {
		return err
	}
	if cfg.activity {
		st := r.step
		var err error
		r.sub, err = r.c.nc.Subscribe(protocol.Subject(protocol.PrefixActive, st.AgentID, st.TurnID), func(m *nats.Msg) {
			r.deliver(inbound{subject: m.Subject, data: m.Data})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// readFrom (re)starts the run's reading of the turn's output subject at
// stream sequence start. What an earlier reader delivered stays queued;
// duplicates are dropped by Next.
func (r *StepRun) readFrom(start uint64) error {
	if r.cons != nil {
		r.cons.Stop()
	}
	st := r.step
	ctx, cancel := r.c.bounded(context.Background())
	defer cancel()
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, st.AgentID, st.TurnID)}}
	if start > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	}
	cons, err := r.c.js.OrderedConsumer(ctx, protocol.StreamOutputs, cfg)
	if err != nil {
		return err
	}
	r.cons, err = cons.Consume(func(m jetstream.Msg) {
		r.deliver(inbound{subject: m.Subject(), data: m.Data()})
	})
	return err
}

// deliver hands a message to Next, or drops it once the run is closed.
func (r *StepRun) deliver(m inbound) {
	select {
	case r.in <- m:
	case <-r.stop:
	}
}

// Next returns the step's next event: a *CallOutput (one per call, each
// once, whatever the redeliveries), an *Activity, and last the
// *StepDone, after which it returns io.EOF. A step whose calls wait for
// approval starts with a *StepPending, before anything runs: answer it
// with [Client.Decide] and keep calling Next. Events of other
// steps and duplicates are skipped. A malformed message on the turn's
// subjects is returned as an *EventError, and Next may be called again.
// It returns ctx's error when ctx ends first, and ErrClosed after Close.
func (r *StepRun) Next(ctx context.Context) (Event, error) {
	if r.done != nil {
		return nil, io.EOF
	}
	for {
		var m inbound
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.stop:
			return nil, ErrClosed
		case m = <-r.in:
		}
		ev, err := DecodeEvent(m.subject, m.data)
		if errors.Is(err, ErrUnknownEvent) {
			r.c.log.Debug("skipping an event of an unknown type", "subject", m.subject, "err", err)
			continue
		}
		if err != nil {
			return nil, err
		}
		if !r.mine(ev) {
			continue
		}
		return ev, nil
	}
}

// mine reports whether ev belongs to this step and was not returned yet.
func (r *StepRun) mine(ev Event) bool {
	n := r.step.Step
	switch ev := ev.(type) {
	case *CallOutput:
		if ev.Step != n || !r.calls[ev.CallID] || r.seenCall[ev.CallID] {
			return false
		}
		r.seenCall[ev.CallID] = true
	case *StepPending:
		if ev.Step != n || r.pending {
			return false
		}
		r.pending = true
	case *Activity:
		return r.calls[ev.CallID]
	case *StepDone:
		if ev.Step != n {
			return false
		}
		r.done = ev
	}
	return true
}

// ErrClosed is what Next returns once the run is closed.
var ErrClosed = errors.New("gateway: the step run is closed")

// Wait reads the step's events until its step.done and returns it,
// skipping (and logging) malformed ones. An approval step waits for its
// decisions: read its *StepPending with Next to answer it.
func (r *StepRun) Wait(ctx context.Context) (*StepDone, error) {
	for {
		ev, err := r.Next(ctx)
		var bad *EventError
		switch {
		case errors.As(err, &bad):
			r.c.log.Warn("skipping a malformed event", "err", err)
			continue
		case err == io.EOF:
			return r.done, nil
		case err != nil:
			return nil, err
		}
		if d, ok := ev.(*StepDone); ok {
			return d, nil
		}
	}
}

// Close stops reading the step's events. It is safe to call more than
// once.
func (r *StepRun) Close() {
	r.stopOnce.Do(func() {
		close(r.stop)
		if r.cons != nil {
			r.cons.Stop()
		}
		if r.sub != nil {
			_ = r.sub.Unsubscribe()
		}
	})
}
