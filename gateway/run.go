package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/protocol"
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
	dead     jetstream.ConsumeContext
	consOf   jetstream.Consumer // the server-side consumers of cons and dead,
	deadOf   jetstream.Consumer // deleted when they stop (see drop)
	sub      *nats.Subscription

	// Core reads (core.go): the subscriptions made before the publish,
	// their messages, and when to check whether they missed any.
	coreSubs   []*nats.Subscription
	coreCh     chan *nats.Msg
	check      *time.Timer
	reconnects uint64
	sent       time.Time

	// Duplicates are told by what they are about, never by Nats-Msg-Id:
	// an event stored past the stream's duplicate window can share the
	// id of another kind of event (the output of a call named "pending"
	// and its step.pending's).
	seenCall map[string]bool // call ids whose output was returned
	seenDL   map[string]bool // dead letters returned, by message id or body
	pending  bool
	done     *protocol.StepDone
	failed   error // the step's dead letter, or its number reused: it never ends
	copy     bool  // the stream took the publish for a copy of a step it had
}

type inbound struct {
	subject string
	data    []byte
	dead    nats.Header // the headers of a dead letter; nil for an event
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
	r.readDead()
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
	r.drop(r.cons, r.consOf, protocol.StreamOutputs)
	st := r.step
	ctx, cancel := r.c.bounded(context.Background())
	defer cancel()
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, st.AgentID, st.TurnID)},
		InactiveThreshold: readerIdle}
	if start > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	}
	cons, err := r.c.js.OrderedConsumer(ctx, protocol.StreamOutputs, cfg)
	if err != nil {
		return err
	}
	r.consOf = cons
	r.cons, err = cons.Consume(func(m jetstream.Msg) {
		r.deliver(inbound{subject: m.Subject(), data: m.Data()})
	})
	return err
}

// readDead reads the turn's dead letters (stream TURN_DEAD, from its
// start: a turn has few, and a re-sent step's may be old), so that a step
// the workers gave up on ends its run with an error instead of never. A
// server without the stream (no worker ever started) has no dead letters
// to read; that is logged, not an error of the step.
func (r *StepRun) readDead() {
	st := r.step
	ctx, cancel := r.c.bounded(context.Background())
	defer cancel()
	cons, err := r.c.js.OrderedConsumer(ctx, protocol.StreamDead, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{protocol.Subject(protocol.PrefixDead, st.AgentID, st.TurnID)}, InactiveThreshold: readerIdle})
	if err == nil {
		r.deadOf = cons
		r.dead, err = cons.Consume(func(m jetstream.Msg) {
			h := m.Headers()
			if h == nil {
				h = nats.Header{}
			}
			r.deliver(inbound{subject: m.Subject(), data: m.Data(), dead: h})
		})
	}
	if err != nil {
		r.c.log.Debug("not reading the turn's dead letters", "stream", protocol.StreamDead, "err", err)
	}
}

// deadLetter returns the error a dead letter of the turn means for this
// step: the step itself dead-lettered (it will never run), or an answer
// to its approval that was; nil for one of another step.
func (r *StepRun) deadLetter(h nats.Header, data []byte) *DeadLetterError {
	st := r.step
	// The original's Nats-Msg-Id is kept as Dead-Nats-Msg-Id; the body's
	// step number stands in when a long message lost its headers.
	id := h.Get(protocol.HeaderDeadPrefix + jetstream.MsgIDHeader)
	var head struct {
		Step *int64 `json:"step"`
	}
	_ = json.Unmarshal(data, &head)
	ofStep := id == protocol.StepMsgID(st.AgentID, st.TurnID, st.Step) || (id == "" && head.Step != nil && *head.Step == st.Step)
	e := &DeadLetterError{Subject: h.Get(protocol.HeaderDeadSubject), MsgID: id, Reason: h.Get(protocol.HeaderDeadReason)}
	switch prefix, _, _ := strings.Cut(e.Subject, "."+st.AgentID+"."); {
	case (prefix == protocol.PrefixCall || prefix == protocol.PrefixTask) && ofStep:
		e.Step = true
		return e
	case prefix == protocol.PrefixApproval && (strings.HasPrefix(id, protocol.ApprovalMsgID(st.AgentID, st.TurnID, st.Step, 1)) || id == "" && ofStep):
		return e
	}
	return nil
}

// seenDead reports whether the dead letter was returned before (the core
// subscription and the stream both deliver it), and marks it returned.
func (r *StepRun) seenDead(dl *DeadLetterError, data []byte) bool {
	key := dl.Subject + "\x00" + dl.MsgID
	if dl.MsgID == "" {
		sum := sha256.Sum256(data)
		key += "\x00" + string(sum[:])
	}
	if r.seenDL[key] {
		return true
	}
	if r.seenDL == nil {
		r.seenDL = map[string]bool{}
	}
	r.seenDL[key] = true
	return false
}

// deliver hands a message to Next, or drops it once the run is closed.
func (r *StepRun) deliver(m inbound) {
	select {
	case r.in <- m:
	case <-r.stop:
	}
}

// Next returns the step's next event: a *protocol.CallOutput (one per call, each
// once, whatever the redeliveries), an *protocol.Activity, and last the
// *protocol.StepDone, after which it returns io.EOF. A step whose calls wait for
// approval starts with a *protocol.StepPending, before anything runs: answer it
// with [Client.Decide] and keep calling Next. Events of other
// steps and duplicates are skipped. A malformed message on the turn's
// subjects is returned as an *EventError, and Next may be called again.
// A step the workers dead-lettered (it will never end) is a
// *DeadLetterError, returned from then on; so is, once, a dead-lettered
// answer to the step's approval. A step.done that does not answer the
// step's calls is an *EventError, or, when the stream had taken the step
// for a copy of one it had, an error wrapping ErrStepReused, from then on. It returns ctx's error when ctx ends
// first, and ErrClosed after Close.
func (r *StepRun) Next(ctx context.Context) (protocol.Event, error) {
	if r.done != nil {
		return nil, io.EOF
	}
	if r.failed != nil {
		return nil, r.failed
	}
	for {
		var m inbound
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.stop:
			return nil, ErrClosed
		case m = <-r.in:
		case cm := <-r.coreCh:
			m = inboundOf(cm)
		case <-r.checkC():
			r.checkCore()
			continue
		}
		if m.dead != nil {
			dl := r.deadLetter(m.dead, m.data)
			if dl == nil || r.seenDead(dl, m.data) {
				continue
			}
			if dl.Step {
				r.failed = dl
			}
			return nil, dl
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
		if d, ok := ev.(*protocol.StepDone); ok && !r.answers(d) {
			r.done = nil
			if !r.copy {
				// Published as a new step: this one is not the workers'.
				return nil, &EventError{Subject: m.subject, Reason: fmt.Sprintf("a step.done of step %d whose items do not answer its calls", d.Step)}
			}
			r.failed = fmt.Errorf("%w: step %d of turn %s.%s was published before with other calls, and the stream dropped this one as its copy; send every model response under a new step number",
				ErrStepReused, r.step.Step, r.step.AgentID, r.step.TurnID)
			return nil, r.failed
		}
		return ev, nil
	}
}

// answers reports whether d answers this step's calls: one item per
// call, in call order. A step.done of the same number that does not is
// an earlier version's (docs/protocol.md: versions are told apart by the
// call ids in items).
func (r *StepRun) answers(d *protocol.StepDone) bool {
	if len(d.Items) != len(r.step.Calls) {
		return false
	}
	for i, item := range d.Items {
		var it struct {
			CallID string `json:"call_id"`
		}
		if json.Unmarshal(item, &it) != nil || it.CallID != r.step.Calls[i].CallID {
			return false
		}
	}
	return true
}

// mine reports whether ev belongs to this step and was not returned yet.
func (r *StepRun) mine(ev protocol.Event) bool {
	n := r.step.Step
	switch ev := ev.(type) {
	case *protocol.CallOutput:
		if ev.Step != n || !r.calls[ev.CallID] || r.seenCall[ev.CallID] {
			return false
		}
		r.seenCall[ev.CallID] = true
	case *protocol.StepPending:
		if ev.Step != n || r.pending {
			return false
		}
		r.pending = true
	case *protocol.Activity:
		return r.calls[ev.CallID]
	case *protocol.StepDone:
		if ev.Step != n {
			return false
		}
		r.done = ev
	}
	return true
}

// ErrStepReused is wrapped by the error Next returns, from then on, when
// the step's number was published before with other calls: the stream
// took this step for a copy of that one, so nothing of it runs, and the
// step.done that came answers the other calls.
var ErrStepReused = errors.New("the step number was used for another step")

// ErrClosed is what Next returns once the run is closed.
var ErrClosed = errors.New("gateway: the step run is closed")

// DeadLetterError is what Next returns for a message of the step that the
// workers dead-lettered (docs/protocol.md, Dead letters) instead of
// running it. With Step set it is the step itself: it will never run nor
// end, and Next returns the same error from then on; send the model's
// response again as a new, fixed step, or end the turn. Otherwise it is
// an answer to the step's approval, refused (one that missed a call or
// named an unknown one): the step still waits; Decide again with the next
// n, and call Next again.
type DeadLetterError struct {
	// Subject is the dead-lettered message's (turn.call.…, turn.task.…
	// or turn.approval.…), MsgID its Nats-Msg-Id.
	Subject, MsgID string
	// Reason is the worker's: "malformed step: …" or "delivery limit
	// reached: …" for a step, "malformed approval: …" for an answer.
	Reason string
	// Step reports whether the step itself was dead-lettered.
	Step bool
}

// Error says what was dead-lettered and why.
func (e *DeadLetterError) Error() string {
	what := "an answer to the step's approval"
	if e.Step {
		what = "the step"
	}
	return fmt.Sprintf("%s (%s) was dead-lettered: %s", what, e.Subject, e.Reason)
}

// Wait reads the step's events until its step.done and returns it,
// skipping (and logging) malformed ones; a step the workers dead-lettered
// is its *DeadLetterError. An approval step waits for its decisions: read
// its *protocol.StepPending with Next to answer it.
func (r *StepRun) Wait(ctx context.Context) (*protocol.StepDone, error) {
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
		if d, ok := ev.(*protocol.StepDone); ok {
			return d, nil
		}
	}
}

// Close stops reading the step's events. It is safe to call more than
// once.
func (r *StepRun) Close() {
	r.stopOnce.Do(func() {
		close(r.stop)
		if r.check != nil {
			r.check.Stop()
		}
		for _, sub := range r.coreSubs {
			_ = sub.Unsubscribe()
		}
		r.drop(r.cons, r.consOf, protocol.StreamOutputs)
		r.drop(r.dead, r.deadOf, protocol.StreamDead)
		if r.sub != nil {
			_ = r.sub.Unsubscribe()
		}
	})
}

// readerIdle is how long the server keeps a step's reader (an ordered
// consumer) that nobody pulls from: the backstop for a gateway that
// died without deleting it. The library's default, five minutes, let a
// busy gateway or MCP door leave thousands behind, past a stream's
// consumer limit, after which every Send failed.
const readerIdle = time.Minute

// drop stops a reader and deletes its consumer on the server, off the
// caller's path: stopping only ends the pulls, and the consumer would
// stay until readerIdle.
func (r *StepRun) drop(cc jetstream.ConsumeContext, c jetstream.Consumer, stream string) {
	if cc == nil {
		return
	}
	cc.Stop()
	if c == nil {
		return
	}
	info := c.CachedInfo()
	if info == nil {
		return
	}
	go func() {
		ctx, cancel := r.c.bounded(context.Background())
		defer cancel()
		if err := r.c.js.DeleteConsumer(ctx, stream, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			r.c.log.Debug("a step reader's consumer stays until it idles out", "stream", stream, "consumer", info.Name, "err", err)
		}
	}()
}
