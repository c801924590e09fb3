package turn

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/agentbull/toolruntime/internal/wire"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// JournalRef identifies a call of a step across the fleet: the key of
// its claim and outcome in the journal, and whose call the Hooks hear of.
type JournalRef struct {
	AgentID string
	TurnID  string
	Step    int64
	CallID  string
	// Digest is CallDigest of the call: what it asks for, stored
	// with its claim.
	Digest string
}

// Input is one step to dispatch.
type Input struct {
	AgentID string
	TurnID  string
	Step    int64
	Calls   []protocol.CallItem
	// FairKey is the step's fairness key (tool.Call.FairKey).
	FairKey string
	// Loaded holds the keys (ToolKey) of the deferred tools this turn has
	// loaded through tool search.
	Loaded map[string]bool
	// Approval, when set, holds the step (StepResult.Held) if any call whose
	// arguments are valid needs approval under it.
	Approval *Policy
	// Stored are the calls of a decided pending step, by call id: each
	// runs with its stored arguments, or is answered with its outcome.
	Stored map[string]*HeldCall
	// Hooks, when set, are told of the step's calls.
	Hooks *Hooks
	// obs, set by a Runner, is its step's observer, told of the calls in
	// place of Hooks: three funcs bound to it were 48 bytes of every step
	// in flight.
	obs *stepObserver
	// Aborts, when set, aborts the step's running calls when the step's
	// context ends (the Runner's Cancels entry, which ends it): the
	// dispatcher then registers nothing on the context itself.
	Aborts Aborter
}

// Aborter tells a dispatcher when a step is aborted, in place of a
// context.AfterFunc on the step's context: the owner of the step's
// cancellation calls the abort itself, and the context keeps no
// registration (a map of children and a Done channel, per step in
// flight).
type Aborter interface {
	// OnAbort has f called once when the step is aborted, at once when
	// it was already.
	OnAbort(f func())
	// StopAbort undoes OnAbort, and reports false when f was called
	// or is being called.
	StopAbort() bool
}

// Outcome is how one call ended. It is stored in the journal and so
// marshals to JSON.
//
// What few calls have (presentation events, repairs, the tools a search
// loaded, media notes) is behind one pointer, More, read through the
// methods of the same names: an outcome is in every running call's cell,
// and the eight cells of a step are most of what a no-op step allocates,
// which paces the collector. 88 bytes fewer per cell put an 8-call step's
// one allocation in the 2,048-byte size class, not the 2,688-byte one
// (TestCellSizes).
type Outcome struct {
	CallID    string
	Name      string
	Namespace string
	Err       *tool.Error
	Item      json.RawMessage
	Details   any
	Activity  string
	Duration  time.Duration // duration_ms in JSON (MarshalJSON)
	EndTurn   bool
	Complete  bool
	// The flags that are not stored sit beside the two that are, in the
	// padding before the pointer.

	// Replayed is set when the outcome came from the journal.
	Replayed bool
	// Ran is set when the tool ran in this attempt.
	Ran bool
	// Reused is set when the call id was the claim of a different call.
	Reused bool
	// bounded is set once the outcome is clipped to the event budget.
	bounded bool
	// More is nil for an outcome without any of its fields.
	More *OutcomeMore
}

// OutcomeMore is what few outcomes have (Outcome.More).
type OutcomeMore struct {
	Events  []protocol.PresentationEvent
	Repairs []string
	// Loaded are the keys of deferred tools a tool search loaded.
	Loaded []string
	// MediaNotes, when Item's output is an array, are its parts' notes
	// (protocol.CallOutput.MediaNotes), kept so that a step.done built
	// from a replayed outcome can still say what it left out and where.
	MediaNotes []string
}

// Events are the tool's presentation events.
func (o *Outcome) Events() []protocol.PresentationEvent {
	if o.More == nil {
		return nil
	}
	return o.More.Events
}

// Repairs name the ladder rungs that made the arguments parse.
func (o *Outcome) Repairs() []string {
	if o.More == nil {
		return nil
	}
	return o.More.Repairs
}

// Loaded are the keys of deferred tools a tool search loaded.
func (o *Outcome) Loaded() []string {
	if o.More == nil {
		return nil
	}
	return o.More.Loaded
}

// MediaNotes are the notes of Item's parts (OutcomeMore.MediaNotes).
func (o *Outcome) MediaNotes() []string {
	if o.More == nil {
		return nil
	}
	return o.More.MediaNotes
}

// more is o.More, made when it is not.
func (o *Outcome) more() *OutcomeMore {
	if o.More == nil {
		o.More = new(OutcomeMore)
	}
	return o.More
}

// Status is "ok" or "error".
func (o *Outcome) Status() string {
	if o.Err != nil {
		return protocol.StatusError
	}
	return protocol.StatusOK
}

// event is the call.output of o in the step of ref, the one conversion of
// an outcome to the wire type.
func (o *Outcome) event(ref JournalRef) *protocol.CallOutput {
	ev := &protocol.CallOutput{
		Type: protocol.EventCallOutput, AgentID: ref.AgentID, TurnID: ref.TurnID, Step: ref.Step,
		CallID: o.CallID, Name: o.Name, Namespace: o.Namespace, Status: o.Status(), Error: CallError(o.Err),
		Item: o.Item, Details: details(o.Details), Events: o.Events(), Repairs: o.Repairs(),
		Activity: o.Activity, DurationMS: o.Duration.Milliseconds(), MediaNotes: o.MediaNotes(),
	}
	if o.Reused {
		// The call id's own call.output holds its plain message id.
		ev.Version = ref.Digest
	}
	return ev
}

// StepResult is how a step ended.
type StepResult struct {
	// Outcomes are in call order, one per call.
	Outcomes           []*Outcome
	EndTurn            bool
	CompleteActorEvent bool
	// Abandoned is set when ctx ended for a reason other than the turn's
	// cancel (the worker is shutting down): the calls that were cut short
	// were neither stored nor reported, and the step must be delivered
	// again.
	Abandoned bool
	// Held, when set, is a step held for approval: nothing ran.
	Held []HeldCall
}

// Items returns the output items in call order.
func (r *StepResult) Items() []json.RawMessage {
	items := make([]json.RawMessage, len(r.Outcomes))
	for i, o := range r.Outcomes {
		items[i] = o.Item
	}
	return items
}

// MediaNotes returns the outcomes' media notes in call order
// (protocol.StepDone.MediaNotes), or nil when no output holds media.
func (r *StepResult) MediaNotes() [][]string {
	var notes [][]string
	for i, o := range r.Outcomes {
		if len(o.MediaNotes()) > 0 {
			if notes == nil {
				notes = make([][]string, len(r.Outcomes))
			}
			notes[i] = o.MediaNotes()
		}
	}
	return notes
}

// outcomeJSON is the journal's record of an Outcome, its fields in the
// order they have always been written.
type outcomeJSON struct {
	CallID     string                       `json:"call_id"`
	Name       string                       `json:"name"`
	Namespace  string                       `json:"namespace"`
	Err        *tool.Error                  `json:"error,omitempty"`
	Item       json.RawMessage              `json:"item"`
	Details    any                          `json:"details,omitempty"`
	Events     []protocol.PresentationEvent `json:"events,omitempty"`
	Repairs    []string                     `json:"repairs,omitempty"`
	Activity   string                       `json:"activity,omitempty"`
	EndTurn    bool                         `json:"end_turn,omitempty"`
	Complete   bool                         `json:"complete_actor_event,omitempty"`
	Loaded     []string                     `json:"loaded,omitempty"`
	MediaNotes []string                     `json:"media_notes,omitempty"`
}

// MarshalJSON writes the journal's record of an outcome: Duration as
// duration_ms, the unit of the call.output event. Every call's outcome is
// stored, and the reflection of json.Marshal over it was a sixtieth of a
// no-op step's CPU: an outcome without an error, details or events is
// written field by field (append), the others by json.Marshal.
func (o Outcome) MarshalJSON() ([]byte, error) {
	if b, ok := o.append(); ok {
		return b, nil
	}
	return o.marshal()
}

// marshal is MarshalJSON through json.Marshal.
func (o Outcome) marshal() ([]byte, error) {
	return json.Marshal(struct {
		outcomeJSON
		DurationMS int64 `json:"duration_ms"`
	}{outcomeJSON{
		CallID: o.CallID, Name: o.Name, Namespace: o.Namespace, Err: o.Err, Item: o.Item, Details: o.Details,
		Events: o.Events(), Repairs: o.Repairs(), Activity: o.Activity, EndTurn: o.EndTurn, Complete: o.Complete,
		Loaded: o.Loaded(), MediaNotes: o.MediaNotes(),
	}, o.Duration.Milliseconds()})
}

// append writes what marshal writes, byte for byte, for an outcome
// without an error, details or events.
func (o *Outcome) append() ([]byte, bool) {
	if o.Err != nil || o.Details != nil || len(o.Events()) > 0 {
		return nil, false
	}
	b := make([]byte, 0, 96+len(o.CallID)+len(o.Name)+len(o.Namespace)+len(o.Item)+len(o.Activity))
	b = wire.AppendString(append(b, `{"call_id":`...), o.CallID)
	b = wire.AppendString(append(b, `,"name":`...), o.Name)
	b = wire.AppendString(append(b, `,"namespace":`...), o.Namespace)
	var ok bool
	if b, ok = wire.AppendRaw(append(b, `,"item":`...), o.Item); !ok {
		return nil, false
	}
	if len(o.Repairs()) > 0 {
		b = wire.AppendStrings(append(b, `,"repairs":`...), o.Repairs())
	}
	if o.Activity != "" {
		b = wire.AppendString(append(b, `,"activity":`...), o.Activity)
	}
	if o.EndTurn {
		b = append(b, `,"end_turn":true`...)
	}
	if o.Complete {
		b = append(b, `,"complete_actor_event":true`...)
	}
	if len(o.Loaded()) > 0 {
		b = wire.AppendStrings(append(b, `,"loaded":`...), o.Loaded())
	}
	if len(o.MediaNotes()) > 0 {
		b = wire.AppendStrings(append(b, `,"media_notes":`...), o.MediaNotes())
	}
	b = strconv.AppendInt(append(b, `,"duration_ms":`...), o.Duration.Milliseconds(), 10)
	return append(b, '}'), true
}

// UnmarshalJSON reads duration_ms, and the nanoseconds of "duration" that
// workers before it stored: during a rolling upgrade a new worker replays
// outcomes an old one journaled.
func (o *Outcome) UnmarshalJSON(data []byte) error {
	var v struct {
		outcomeJSON
		DurationMS *int64 `json:"duration_ms"`
		DurationNS *int64 `json:"duration"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	f := &v.outcomeJSON
	o.CallID, o.Name, o.Namespace, o.Err, o.Item, o.Details = f.CallID, f.Name, f.Namespace, f.Err, f.Item, f.Details
	o.Activity, o.EndTurn, o.Complete = f.Activity, f.EndTurn, f.Complete
	if f.Events != nil || f.Repairs != nil || f.Loaded != nil || f.MediaNotes != nil {
		o.More = &OutcomeMore{Events: f.Events, Repairs: f.Repairs, Loaded: f.Loaded, MediaNotes: f.MediaNotes}
	}
	switch {
	case v.DurationMS != nil:
		o.Duration = time.Duration(*v.DurationMS) * time.Millisecond
	case v.DurationNS != nil:
		o.Duration = time.Duration(*v.DurationNS)
	}
	return nil
}
