package turn

import (
	"context"
	"errors"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// ErrClaimed is returned by Journal.Claim when an earlier attempt claimed
// the call and died before storing its outcome.
var ErrClaimed = errors.New("call was claimed by an earlier attempt that did not finish")

// ErrReused is returned by Journal.Claim when the call id was claimed
// for a different call (another tool or other arguments: JournalRef.Digest
// differs): a gateway re-sent the step with other calls under used ids.
var ErrReused = errors.New("call id was used for a different call")

// Journal makes calls effectively-once across redelivery of a step. The
// worker implements it on the TURN_STATE bucket.
type Journal interface {
	// Claim records that call is about to run, with a create-only write.
	// It returns the stored outcome when an earlier attempt finished the
	// call, ErrClaimed when an earlier attempt claimed it but never
	// stored an outcome, and ErrReused when the claim is of a call with
	// another digest.
	Claim(ctx context.Context, ref JournalRef) (*Outcome, error)
	// Store records the outcome of a claimed call.
	Store(ctx context.Context, ref JournalRef, o *Outcome) error
}

// Recorder is implemented by a Journal that can journal a read-only
// call with one write, after it ran, instead of a claim before and its
// outcome after (docs/protocol.md, "Writes per step"). Running a
// read-only call twice is harmless, so nothing needs to be claimed before
// it runs; what the journal still owes is that every attempt publishes
// the same outcome, and that a reused call id is found.
type Recorder interface {
	// Record stores o as the outcome of ref's call with a create-only
	// write. It returns the stored outcome when an earlier (or a
	// concurrent) attempt stored one first, which is then the outcome to
	// report, and ErrReused when the key holds another call's.
	Record(ctx context.Context, ref JournalRef, o *Outcome) (*Outcome, error)
}

// redeliveredKey marks a context as the handling of a step the server
// delivered before.
type redeliveredKey struct{}

// Redelivered marks ctx as the handling of a step delivered at least once
// before. Its read-only calls are claimed before they run, as every
// other call is, so that one an earlier attempt finished is answered from
// the journal rather than run again.
func Redelivered(ctx context.Context) context.Context {
	return context.WithValue(ctx, redeliveredKey{}, true)
}

// recordAfter reports whether the call is journaled with one write once
// it ran (Recorder): a read-only tool, a journal that can, and a step on
// its first delivery.
func (p *pending) recordAfter() bool {
	if _, ok := p.st.d.Journal.(Recorder); !ok || !p.invocation.Tool.Spec().ReadOnly {
		return false
	}
	redelivered, _ := p.st.ctx.Value(redeliveredKey{}).(bool)
	return !redelivered
}

// ReuseChecker is implemented by a Journal that can tell which of the
// calls of one step that failed before running (unknown tool, invalid
// arguments: never claimed) use a call id the journal holds for another
// call, so that a re-sent step is not answered under the first version's
// message ids (docs/protocol.md, "Reused call ids").
type ReuseChecker interface {
	ReusedIDs(ctx context.Context, refs []JournalRef) (map[string]bool, error)
}

// answered settles, off the common path, a call that comes after the
// turn's abort, a tool search, and a call an earlier attempt settled (the
// journal's claim). It reports whether the call has its outcome without
// running.
func (p *pending) answered() bool {
	ctx, d := p.st.ctx, p.st.d
	if err := context.Cause(ctx); err != nil {
		// A search loads tools into the turn: after the turn's abort it is
		// answered like any other call, not run.
		p.outcome = notRun(*p.call, err)
		d.ended(ctx, p)
		return true
	}
	if p.search {
		p.outcome = d.search(p.st.set, *p.call)
		d.ended(ctx, p)
		return true
	}
	if d.Journal == nil {
		return false
	}
	if p.recordAfter() {
		p.record = true
		return false
	}
	stored, err := d.Journal.Claim(ctx, p.ref())
	sp := p.invocation.Tool.Spec()
	switch {
	case err == nil && stored == nil && context.Cause(ctx) != nil:
		// The turn was aborted while the claim was on its way (a journal
		// need not stop waiting for it): the call is claimed but not run,
		// and its stored outcome says so to a redelivery.
		p.outcome = notRun(*p.call, context.Cause(ctx))
		d.store(ctx, p)
		return true
	case errors.Is(err, ErrReused):
		// Not stored: the journal keeps the call that owns the id.
		p.outcome = reusedOutcome(*p.call, p.st.stepN)
		d.ended(ctx, p)
		return true
	case err == nil && stored != nil:
		stored.Replayed = true
		p.outcome = stored
		d.ended(ctx, p)
		return true
	case errors.Is(err, ErrClaimed) && !sp.ReadOnly:
		p.outcome = errorOutcome(*p.call, tool.Errorf(tool.Interrupted,
			"An earlier attempt at this call stopped while %s was running, so it may have taken effect in part. It is not run again: check its effects before calling it again.", sp.Name))
		d.store(ctx, p)
		return true
	case errors.Is(err, ErrClaimed):
		// A read-only tool changes nothing: running it again is safe.
	case err != nil:
		p.outcome = errorOutcome(*p.call, tool.Errorf(tool.Internal, "The call could not be recorded before running, so it was not run: %v", err))
		d.ended(ctx, p)
		return true
	}
	return false
}

// checkReuse answers as reused the calls that failed before running
// whose ids the journal holds for another call: their own outcome would
// go out under the first version's message id and be dropped as its
// duplicate, leaving the gateway the old outcome.
func (d *Dispatcher) checkReuse(ctx context.Context, ps []*pending) {
	rc, ok := d.Journal.(ReuseChecker)
	if !ok {
		return
	}
	var refs []JournalRef
	for _, p := range ps {
		if p.outcome != nil {
			refs = append(refs, p.ref())
		}
	}
	if len(refs) == 0 {
		return
	}
	// Not under ctx: a step run on an aborted turn (held calls decided by
	// a cancel) still sends its outcomes, under the same message ids.
	reused, err := rc.ReusedIDs(context.WithoutCancel(ctx), refs)
	if err != nil {
		d.logger().Warn("checking a step's failed calls for reused call ids failed", "agent_id", refs[0].AgentID, "turn_id", refs[0].TurnID, "step", refs[0].Step, "err", err)
		return
	}
	for _, p := range ps {
		if p.outcome != nil && reused[p.call.CallID] {
			p.outcome = reusedOutcome(*p.call, p.st.stepN)
		}
	}
}

// reusedOutcome answers a call whose id an earlier version of its step
// used for another call.
func reusedOutcome(c protocol.CallItem, step int64) *Outcome {
	o := errorOutcome(c, tool.Errorf(tool.InvalidArguments,
		"Not run: the call id %q was already used in step %d of this turn for a different call (another tool or other arguments), and a call id names one call. Call again with a new call id.",
		textclip.Text(c.CallID, 300), step))
	o.Reused = true
	return o
}

// store records the outcome in the journal, then reports it. An outcome
// cut short by an abandoned step is neither: the redelivery decides.
func (d *Dispatcher) store(ctx context.Context, p *pending) {
	d.bound(p)
	if p.record && !abandoned(ctx) {
		d.record(ctx, p)
	} else if d.Journal != nil && !abandoned(ctx) {
		// The outcome is stored even when the turn is being aborted: a
		// redelivery must not run the call again.
		if err := d.Journal.Store(context.WithoutCancel(ctx), p.ref(), p.outcome); err != nil {
			ref := p.ref()
			d.logger().Error("storing a call outcome failed; a redelivery will report it interrupted",
				"agent_id", ref.AgentID, "turn_id", ref.TurnID, "step", ref.Step, "call_id", ref.CallID, "err", err)
		}
	}
	d.ended(ctx, p)
}

// record journals a read-only call that ran unclaimed (Recorder). The
// outcome an earlier or concurrent attempt stored first is the one
// reported, so that every attempt's events are the same; a call id the
// journal holds for another call is answered as reused, not stored.
func (d *Dispatcher) record(ctx context.Context, p *pending) {
	ref := p.ref()
	stored, err := d.Journal.(Recorder).Record(context.WithoutCancel(ctx), ref, p.outcome)
	switch {
	case err == nil && stored != nil:
		stored.Replayed = true
		p.outcome = stored
	case errors.Is(err, ErrReused):
		p.outcome = reusedOutcome(*p.call, p.st.stepN)
	case err != nil:
		// Reported all the same: a redelivery runs the read-only call
		// again, which is harmless.
		d.logger().Error("recording a read-only call's outcome failed; a redelivery will run it again",
			"agent_id", ref.AgentID, "turn_id", ref.TurnID, "step", ref.Step, "call_id", ref.CallID, "err", err)
	}
}
