package turnstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// Header names of JetStream message scheduling (nats-server 2.12 and
// later), as package schedule uses them.
const (
	headerSchedule       = "Nats-Schedule"
	headerScheduleTarget = "Nats-Schedule-Target"
)

// ErrChanged is returned by UpdatePending when the record changed since
// it was read: another message decided the step first.
var ErrChanged = errors.New("the pending step changed since it was read")

// PendingKey is the TURN_STATE key of a pending step's record.
func PendingKey(agentID, turnID string, step int64) string {
	return "approval." + agentID + "." + turnID + "." + strconv.FormatInt(step, 10)
}

// Hold implements turn.Approvals with a create-only write.
func (s *Store) Hold(ctx context.Context, p *turn.PendingStep) (*turn.PendingStep, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	// The record must take its verdict later: a record that is stored but
	// cannot be decided would wait for its timer whatever the answer.
	if budget, need := int(s.Pub.MaxPayload())-protocol.Margin, len(data)+verdictRoom(p); need > budget {
		// The same on every delivery: the step is dead-lettered.
		return nil, fmt.Errorf("%w: the step's calls, held for approval, need a record of %d bytes with room for its decision, over the %d bytes one message may hold; send fewer or smaller calls per step",
			protocol.ErrMalformed, need, budget)
	}
	kv := s.Pub.Retry().KV(s.Pub.JS, s.KV)
	_, err = kv.Create(ctx, PendingKey(p.AgentID, p.TurnID, p.Step), data)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, err
	}
	// A redelivered step, or a retried create whose first attempt landed
	// (its record is this one, still pending).
	had, _, err := s.PendingStep(ctx, p.AgentID, p.TurnID, p.Step)
	if err == nil && had == nil {
		return nil, fmt.Errorf("the record of pending step %d vanished between its create and its read", p.Step)
	}
	return had, err
}

// verdictRoom bounds what deciding p adds to its record: the verdict with
// the longest reason kept, and a decision per held call with its id and
// the longest reason kept (textclip.Reason bounds both encoded).
func verdictRoom(p *turn.PendingStep) int {
	const decisionFrame = len(`{"call_id":"","approved":false,"reason":""},`)
	n := len(`,"verdict":{"by":"timeout","seq":18446744073709551615,"decisions":[],"reason":""}`) + textclip.MaxReasonBytes
	for _, c := range p.Calls {
		if c.Approval != "" {
			id, _ := json.Marshal(c.CallID)
			n += decisionFrame + len(id) + textclip.MaxReasonBytes
		}
		if c.Input != nil {
			n += len(`,"input":`) + turn.MaxInputBytes
		}
	}
	return n
}

// Announce implements turn.Approvals: the step's timer, then its
// step.pending event, each with its message id, so that announcing again
// stores nothing new.
func (s *Store) Announce(ctx context.Context, p *turn.PendingStep) error {
	m := nats.NewMsg(protocol.ApprovalTimerSubject(p.AgentID, p.TurnID, p.Step))
	m.Header.Set(headerSchedule, "@at "+p.ExpiresAt.UTC().Format(time.RFC3339))
	m.Header.Set(headerScheduleTarget, protocol.ApprovalTimeoutSubject(p.AgentID, p.TurnID, p.Step))
	timerID := protocol.StepMsgID(p.AgentID, p.TurnID, p.Step) + ".timer"
	if p.Round > 1 {
		// A step held again for input (a later round) has a timer of its
		// own, which de-duplication must not drop.
		timerID += "." + strconv.Itoa(p.Round)
	}
	m.Header.Set(jetstream.MsgIDHeader, timerID)
	m.Data = []byte(`{}`)
	if err := s.Pub.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("scheduling the pending step's timeout: %w", err)
	}
	ev := p.Event()
	if err := s.Pub.Event(ctx, protocol.Subject(protocol.PrefixOutput, p.AgentID, p.TurnID), protocol.StepPendingRoundMsgID(p.AgentID, p.TurnID, p.Step, p.Round), ev); err != nil {
		return err
	}
	// A cancel that came after the step read the mark, and whose note was
	// consumed before this record existed, found no step to finish: the
	// step would wait for its timer. The mark is read again now that the
	// record is stored (a cancel after this read finds the record), and a
	// note of the step's own finishes it.
	cancelled, reason, err := s.readCancelMark(ctx, p.AgentID, p.TurnID)
	if err != nil {
		return fmt.Errorf("reading the turn's cancel mark: %w", err)
	}
	if !cancelled {
		return nil
	}
	return s.Pub.Event(ctx, protocol.Subject(protocol.PrefixApprovalCancel, p.AgentID, p.TurnID),
		protocol.StepMsgID(p.AgentID, p.TurnID, p.Step)+".cancel", protocol.Cancel{Reason: textclip.Reason(reason)})
}

// PendingStep reads a pending step's record and its revision; nil when
// there is none.
func (s *Store) PendingStep(ctx context.Context, agentID, turnID string, step int64) (*turn.PendingStep, uint64, error) {
	kv := s.Pub.Retry().KV(s.Pub.JS, s.KV)
	e, err := kv.Get(ctx, PendingKey(agentID, turnID, step))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var p turn.PendingStep
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return nil, 0, fmt.Errorf("pending step record %s is unreadable: %w", e.Key(), err)
	}
	return &p, e.Revision(), nil
}

// UpdatePending writes p over the revision rev was read at, and returns
// the new revision; ErrChanged when the record changed meanwhile.
func (s *Store) UpdatePending(ctx context.Context, p *turn.PendingStep, rev uint64) (uint64, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return 0, err
	}
	kv := s.Pub.Retry().KV(s.Pub.JS, s.KV)
	next, err := kv.Update(ctx, PendingKey(p.AgentID, p.TurnID, p.Step), data, rev)
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		// A retried write whose first attempt landed reads as a conflict
		// too; the caller reads again and finds its own verdict.
		return 0, ErrChanged
	}
	return next, err
}

// PendingSteps lists the steps of a turn that have a pending-step record
// (in any state).
func (s *Store) PendingSteps(ctx context.Context, agentID, turnID string) ([]int64, error) {
	lister, err := s.KV.ListKeysFiltered(ctx, "approval."+agentID+"."+turnID+".*")
	if err != nil {
		return nil, err
	}
	var steps []int64
	for k := range lister.Keys() {
		if n, err := strconv.ParseInt(k[strings.LastIndexByte(k, '.')+1:], 10, 64); err == nil {
			steps = append(steps, n)
		}
	}
	_ = lister.Stop()
	return steps, ctx.Err()
}

// StopTimer removes a decided step's timer, so that it does not fire. A
// timer that fires anyway finds the step decided and is ignored.
func (s *Store) StopTimer(ctx context.Context, p *turn.PendingStep) error {
	st, err := s.Pub.JS.Stream(ctx, protocol.StreamApprovals)
	if err != nil {
		return err
	}
	return st.Purge(ctx, jetstream.WithPurgeSubject(protocol.ApprovalTimerSubject(p.AgentID, p.TurnID, p.Step)))
}

// NoteCancel tells the fleet, through TURN_APPROVALS, that a turn was
// cancelled, so that one worker finishes its pending steps (aborted)
// although no worker runs them. Every worker that hears the cancel
// publishes the same message id: one note is stored.
func (s *Store) NoteCancel(ctx context.Context, agentID, turnID, reason string) error {
	return s.Pub.Event(ctx, protocol.Subject(protocol.PrefixApprovalCancel, agentID, turnID),
		agentID+"."+turnID+".cancel", protocol.Cancel{Reason: textclip.Reason(reason)})
}

// Rehold implements turn.Reholder: a step held for input whose resumed
// call asked again. The record moves from the decided round to next
// with a compare-and-set (a redelivered decision finds next there and
// announces it again), the old round's timer is removed, and next is
// announced with its round's message ids.
func (s *Store) Rehold(ctx context.Context, decided, next *turn.PendingStep) error {
	for range 5 {
		cur, rev, err := s.PendingStep(ctx, next.AgentID, next.TurnID, next.Step)
		if err != nil {
			return err
		}
		switch {
		case cur == nil:
			return fmt.Errorf("the record of pending step %d is gone", next.Step)
		case cur.Round >= next.Round:
			if cur.State != turn.StatePending {
				return nil // that round is decided already: whoever decided it finishes it
			}
			return s.Announce(ctx, cur)
		case cur.State == turn.StatePending || cur.Resolution == nil || decided.Resolution == nil || cur.Resolution.Seq != decided.Resolution.Seq:
			return fmt.Errorf("pending step %d is not in the round this decision resumed", next.Step)
		}
		if _, err := s.UpdatePending(ctx, next, rev); errors.Is(err, ErrChanged) {
			continue
		} else if err != nil {
			return err
		}
		if err := s.StopTimer(ctx, next); err != nil {
			return fmt.Errorf("removing the last round's timer: %w", err)
		}
		return s.Announce(ctx, next)
	}
	return fmt.Errorf("holding pending step %d again: the record kept changing", next.Step)
}

// reclaim replaces a held call's outcome (turn.Resumes) with a fresh
// claim, with a compare-and-set on the revision it was read at: of two
// attempts at one resume, one runs the call, and the other finds it
// claimed.
func (s *Store) reclaim(ctx context.Context, key string, rev uint64, claim []byte) error {
	kv := s.Pub.Retry().KV(s.Pub.JS, s.KV)
	_, err := kv.Update(ctx, key, claim, rev)
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return turn.ErrClaimed
	}
	return err
}

// AwaitDecided implements turn.Awaiter with a watch of the step's record:
// it returns the record once its round round is decided (or done), or
// ctx's error.
func (s *Store) AwaitDecided(ctx context.Context, agentID, turnID string, step int64, round int) (*turn.PendingStep, error) {
	w, err := s.KV.Watch(ctx, PendingKey(agentID, turnID, step))
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("the watch of pending step %d ended", step)
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var p turn.PendingStep
			if err := json.Unmarshal(e.Value(), &p); err != nil {
				return nil, fmt.Errorf("pending step record %s is unreadable: %w", e.Key(), err)
			}
			if max(p.Round, 1) == round && p.State != turn.StatePending && p.Resolution != nil {
				return &p, nil
			}
			if max(p.Round, 1) > round {
				return nil, fmt.Errorf("pending step %d moved on to round %d", step, p.Round)
			}
		}
	}
}
