// Package wire writes the worker's side of the wire format.
//
// JSON is written byte for byte as encoding/json's Marshal writes it,
// without its reflection (AppendString, AppendStrings, AppendRaw), for
// the events and records every step writes. Strings are escaped as
// json.Marshal escapes them; raw JSON that is unusual is sent back to
// json.Marshal rather than guessed at.
//
// An event over its budget is fitted to it (docs/protocol.md, "Size
// limits"): FitCallOutput and FitStepDone clip media first, then details
// and events, then texts, and say in the event what they left out;
// FitWorkflowEvent clips a workflow event's texts; Fit picks the one
// for an event. ErrTooLarge is what does not fit even clipped; the
// worker's own bounds (a catalog reply's notes, a micro error) are
// here too, beside protocol's budget of an event (EventBudget, Margin).
package wire
