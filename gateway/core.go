package gateway

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/protocol"
)

// A step's events are read, first, from core NATS subscriptions to the
// turn's output and dead-letter subjects (and activity, when asked),
// made on the client's connection before the step is published. The
// workers publish every event on those subjects, so a subscriber that
// was there before the step reaches the workers receives them all, with
// no server-side consumer to create and delete per step: that costs
// four JetStream API round trips per Send, and most of a door's or busy
// gateway's time.
//
// Core NATS is at most once, though. A run reads the stream as before
// (an ordered consumer from the turn's last event, and the dead letters
// from their start) as soon as it may have missed something: the
// connection reconnected since the subscriptions were made, a
// subscription dropped a message (its buffer was full), or the step has
// not ended within coreGrace (a cluster whose interest had not reached
// the worker's server, a subscription refused). What the stream delivers
// twice, Next drops as it drops redeliveries: the effectively-once
// guarantees and the dead-letter path are those of the stream.
//
// A client whose first subscription is refused by the server's
// permissions reads every run from the stream.

type coreState int

const (
	coreUnknown coreState = iota
	coreOn
	coreOff
)

const (
	// coreBuffer is the run's buffer of core messages; past it, a message
	// is dropped and the run reads the stream (an activity event past it
	// is lost, as activity is best effort).
	coreBuffer = 256
	// coreCheck is how often a waiting Next checks for reconnects and
	// drops; coreGrace how long a step may take before its run reads the
	// stream anyway.
	coreCheck = 250 * time.Millisecond
	coreGrace = 2 * time.Second
)

// coreReads reports whether runs read core subscriptions first.
func (c *Client) coreReads() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core != coreOff
}

// subscribeCore subscribes the run to its turn's subjects on core NATS.
// The client's first run also checks, with a round trip after each of
// the output and dead-letter subscriptions, that the server accepted
// them.
func (r *StepRun) subscribeCore(ctx context.Context, cfg sendConfig) error {
	st := r.step
	nc := r.c.nc
	r.coreCh = make(chan *nats.Msg, coreBuffer)
	subjects := []string{protocol.Subject(protocol.PrefixOutput, st.AgentID, st.TurnID), protocol.Subject(protocol.PrefixDead, st.AgentID, st.TurnID)}
	if cfg.activity {
		subjects = append(subjects, protocol.Subject(protocol.PrefixActive, st.AgentID, st.TurnID))
	}
	r.c.mu.Lock()
	probe := r.c.core == coreUnknown
	r.c.mu.Unlock()
	state := coreOn
	for i, s := range subjects {
		sub, err := nc.ChanSubscribe(s, r.coreCh)
		if err != nil {
			return err
		}
		r.coreSubs = append(r.coreSubs, sub)
		if probe && i < 2 && state == coreOn {
			refused, err := r.refused(ctx, s)
			if err != nil {
				return err
			}
			if refused {
				state = coreOff
				r.c.log.Info("reading step events from the streams only: subscribing to them is not allowed", "subject", s)
			}
		}
	}
	r.reconnects = nc.Stats().Reconnects
	r.sent = time.Now()
	r.check = time.NewTimer(coreCheck)
	if probe {
		r.c.mu.Lock()
		if r.c.core == coreUnknown {
			r.c.core = state
		}
		r.c.mu.Unlock()
	}
	return nil
}

// dropCore ends the run's core reads.
func (r *StepRun) dropCore() {
	for _, sub := range r.coreSubs {
		_ = sub.Unsubscribe()
	}
	r.coreSubs, r.coreCh = nil, nil
	if r.check != nil {
		r.check.Stop()
		r.check = nil
	}
}

// refused reports whether the server refused the subscription to
// subject: it answers a refused subscription with an error before the
// flush's PONG, and the connection keeps it as its last error.
func (r *StepRun) refused(ctx context.Context, subject string) (bool, error) {
	ctx, cancel := r.c.bounded(ctx)
	defer cancel()
	if err := r.c.nc.FlushWithContext(ctx); err != nil {
		return false, err
	}
	err := r.c.nc.LastError()
	return errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(strings.ToLower(err.Error()), strings.ToLower(`"`+subject+`"`)), nil
}

// readPrior reads the stream from the turn's start when the turn's
// subject already holds an event of this step or a later one: the step
// was sent before (past the duplicate windows), and its events may all be
// there already. It runs after the core subscriptions are made, so that
// an event published meanwhile is in one or the other.
func (r *StepRun) readPrior(ctx context.Context) error {
	seq, earlier, err := r.c.turnHead(ctx, r.step)
	switch {
	case err != nil:
		// A connection may be allowed to subscribe and not to get a
		// stream's messages: it reads the turn from its start, as a run
		// of step 0 always did.
		r.c.log.Debug("reading the turn from its start", "stream", protocol.StreamOutputs, "err", err)
	case seq == 0 || earlier:
		return nil
	}
	return r.readAll()
}

// readAll reads the turn's events from the stream's start, and its dead
// letters unless the run reads them already.
func (r *StepRun) readAll() error {
	if err := r.readFrom(1); err != nil {
		return err
	}
	if r.deadOf == nil {
		r.readDead()
	}
	return nil
}

// checkC is the channel of the run's next check, nil when the run is not
// reading core subscriptions or already reads the stream.
func (r *StepRun) checkC() <-chan time.Time {
	if r.check == nil || r.consOf != nil {
		return nil
	}
	return r.check.C
}

// checkCore starts reading the stream when the core subscriptions may
// have missed an event, and arms the next check otherwise.
func (r *StepRun) checkCore() {
	missed := r.c.nc.Stats().Reconnects != r.reconnects || time.Since(r.sent) >= coreGrace
	for _, sub := range r.coreSubs[:2] { // outputs and dead letters
		if n, err := sub.Dropped(); err == nil && n > 0 {
			missed = true
		}
	}
	if missed && r.fallback() == nil {
		return
	}
	r.check.Reset(coreCheck)
}

// fallback reads the turn's events from the stream, from the turn's last
// event before this step (or its start), and its dead letters.
func (r *StepRun) fallback() error {
	ctx, cancel := r.c.bounded(context.Background())
	start, err := r.c.readStart(ctx, r.step)
	cancel()
	if err != nil {
		start = 1
	}
	if err := r.readFrom(start); err != nil {
		r.c.log.Debug("a step's run could not read the stream; trying again", "stream", protocol.StreamOutputs, "err", err)
		r.consOf = nil
		return err
	}
	if r.deadOf == nil {
		r.readDead()
	}
	return nil
}

// inboundOf is a core message as Next reads it.
func inboundOf(m *nats.Msg) inbound {
	in := inbound{subject: m.Subject, data: m.Data}
	if strings.HasPrefix(m.Subject, protocol.PrefixDead+".") {
		in.dead = m.Header
		if in.dead == nil {
			in.dead = nats.Header{}
		}
	}
	return in
}
