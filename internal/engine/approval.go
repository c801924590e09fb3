package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/turnstate"
	"github.com/agentbull/toolruntime/protocol"
)

// handleApproval serves TURN_APPROVALS: a gateway's answer, a pending
// step's fired timer, or the fleet's note that a turn was cancelled. Each
// decides pending steps with a compare-and-set on their record (the
// first complete answer wins), then finishes them; a redelivery of the
// message that decided a step finishes it again, which the call journal
// makes run nothing twice.
func (w *Worker) handleApproval(ctx context.Context, msg jetstream.Msg) error {
	md, err := msg.Metadata()
	if err != nil {
		return err
	}
	seq := md.Sequence.Stream
	t := strings.Split(msg.Subject(), ".")
	switch {
	case len(t) == 4:
		return w.onAnswer(ctx, msg, seq)
	case len(t) >= 5 && (!protocol.ValidID(t[3]) || !protocol.ValidID(t[4])):
		// Not the worker's own timer or note (a gateway answers on four
		// tokens).
	case len(t) == 6 && msg.Subject() == protocol.ApprovalTimeoutSubject(t[3], t[4], mustStep(t[5])):
		step, _ := strconv.ParseInt(t[5], 10, 64)
		// A timer always follows its record's store; one that finds no
		// record found it lost (expired with a TTL shrunk since, or
		// purged): its step gets no step.done, which the dead letter says.
		return w.decide(ctx, t[3], t[4], step, seq, true, func(*turn.PendingStep) (*turn.Resolution, error) {
			return &turn.Resolution{By: turn.ByTimeout, Seq: seq}, nil
		})
	case len(t) == 5 && msg.Subject() == protocol.Subject(protocol.PrefixApprovalCancel, t[3], t[4]):
		var c protocol.Cancel
		_ = json.Unmarshal(msg.Data(), &c)
		return w.onTurnCancel(ctx, t[3], t[4], textclip.Reason(c.Reason), seq)
	}
	return &bus.DeadLetter{Reason: fmt.Sprintf("%v: subject %q is not %s.<agent_id>.<turn_id>", protocol.ErrBadApproval, msg.Subject(), protocol.PrefixApproval)}
}

// mustStep reads a step number, or -1 (which no subject holds).
func mustStep(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// onAnswer decides a pending step from a gateway's answer. An answer
// that is malformed, names no pending step, or does not decide exactly
// its pending calls is dead-lettered and the step stays pending; an
// answer for a step decided already is ignored.
func (w *Worker) onAnswer(ctx context.Context, msg jetstream.Msg, seq uint64) error {
	a, err := protocol.ParseApproval(msg.Subject(), msg.Data(), w.cfg.MaxStepBytes)
	if err != nil {
		return &bus.DeadLetter{Reason: err.Error()}
	}
	return w.decide(ctx, a.AgentID, a.TurnID, a.Step, seq, true, func(p *turn.PendingStep) (*turn.Resolution, error) {
		if err := p.Decide(a); err != nil {
			return nil, &bus.DeadLetter{Reason: err.Error()}
		}
		return &turn.Resolution{By: turn.ByAnswer, Seq: seq, Decisions: a.Decisions}, nil
	})
}

// onTurnCancel finishes every pending step of a cancelled turn, aborted.
func (w *Worker) onTurnCancel(ctx context.Context, agentID, turnID, reason string, seq uint64) error {
	steps, err := w.state.PendingSteps(ctx, agentID, turnID)
	if err != nil {
		return fmt.Errorf("listing the turn's pending steps: %w", err)
	}
	var errs []error
	for _, step := range steps {
		err := w.decide(ctx, agentID, turnID, step, seq, false, func(*turn.PendingStep) (*turn.Resolution, error) {
			return &turn.Resolution{By: turn.ByCancel, Seq: seq, Reason: reason}, nil
		})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// decideAttempts bounds the compare-and-set loop of one decision; every
// lost round means another message decided the step, which the next read
// sees.
const decideAttempts = 5

// decide records verdict's answer on the step's record unless the step
// is decided already, then finishes the step. strict says that a message
// for a step without a record is a dead letter (an answer, a timer); a
// cancel that finds none has nothing to do.
func (w *Worker) decide(ctx context.Context, agentID, turnID string, step int64, seq uint64, strict bool, verdict func(*turn.PendingStep) (*turn.Resolution, error)) error {
	log := w.log.With("agent_id", agentID, "turn_id", turnID, "step", step, "approvals_seq", seq)
	for range decideAttempts {
		p, rev, err := w.state.PendingStep(ctx, agentID, turnID, step)
		if err != nil {
			return fmt.Errorf("reading the pending step: %w", err)
		}
		if p == nil {
			if strict {
				return &bus.DeadLetter{Reason: fmt.Sprintf("%v: step %d of turn %s.%s is not pending approval (no such step held, or its record expired)", turn.ErrApproval, step, agentID, turnID)}
			}
			log.Info("no pending step to decide")
			return nil
		}
		switch {
		case p.State == turn.StateDone || p.State == turn.StateDecided && p.Resolution != nil && p.Resolution.Seq != seq:
			by := ""
			if p.Resolution != nil {
				by = p.Resolution.By
			}
			log.Info("approval message ignored: the step was decided already", "decided_by", by)
			return nil
		case p.State == turn.StateDecided:
			// This very message decided it, and finishing was cut short.
			return w.finish(ctx, p, rev)
		}
		v, err := verdict(p)
		if err != nil {
			return err
		}
		p.State, p.Resolution = turn.StateDecided, v
		next, err := w.state.UpdatePending(ctx, p, rev)
		if errors.Is(err, turnstate.ErrChanged) {
			continue
		}
		if err != nil {
			return fmt.Errorf("recording the decision: %w", err)
		}
		log.Info("pending step decided", "by", v.By)
		return w.finish(ctx, p, next)
	}
	return fmt.Errorf("deciding pending step %d: the record kept changing", step)
}

// finish runs a decided step and marks it done.
func (w *Worker) finish(ctx context.Context, p *turn.PendingStep, rev uint64) error {
	if err := w.runner.Resolve(ctx, p); errors.Is(err, turn.ErrHeldAgain) {
		// A resumed call asked for input again: the step is pending once
		// more, with its own record and timer.
		return nil
	} else if err != nil {
		return stepError(err)
	}
	p.State = turn.StateDone
	if _, err := w.state.UpdatePending(context.WithoutCancel(ctx), p, rev); err != nil {
		// Harmless: a later message finds it decided by another and
		// ignores it; a redelivery of this one finishes it again, from the
		// journal.
		w.log.Warn("marking a pending step done failed", "agent_id", p.AgentID, "turn_id", p.TurnID, "step", p.Step, "err", err)
	}
	if err := w.state.StopTimer(context.WithoutCancel(ctx), p); err != nil {
		w.log.Warn("removing a decided step's timer failed; it will fire and be ignored", "agent_id", p.AgentID, "turn_id", p.TurnID, "step", p.Step, "err", err)
	}
	return nil
}
