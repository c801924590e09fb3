// Package wire writes the worker's side of the wire format: the one
// home of its event encoders, beside protocol's types.
//
// What flows through it: turn builds a call's item (FunctionOutput) and
// bounds its call.output to one event (FitCallOutput); bus's Publisher
// asks Append for an event's bytes and, when they are over the budget
// its headers leave, Fit to clip the event in place and Marshal to write
// it again; activities are written within their budget (AppendActivity).
// The journal's records use the same appenders (AppendString,
// AppendStrings, AppendRaw).
//
// JSON is written byte for byte as encoding/json's Marshal writes it,
// without its reflection, for the events and records every step writes
// (call.output, step.done, activity, a function_call_output item):
// field by field, in the order of the struct tags. Strings are escaped
// as json.Marshal escapes them; anything else, and raw JSON that is
// unusual, is left to json.Marshal rather than guessed at. The fuzz
// targets hold every writer to json.Marshal's bytes.
//
// An event over its budget is fitted to it (docs/protocol.md, "Size
// limits"): FitCallOutput and FitStepDone clip media first, then
// details and events, then texts (textclip.Text), and say in the event
// what they left out; FitWorkflowEvent clips a workflow event's texts.
// ErrTooLarge is what does not fit even clipped. The worker's own bounds
// (a catalog reply's notes, a micro error) are here too.
//
// Why an internal package and not protocol itself: protocol is what a
// gateway links, and its exported names are its users' API. Encoders as
// methods of protocol's types, with the appenders and the fitting beside
// them, would have to be exported to the worker (the journal's records
// use the appenders, turn and bus the fitting) and would grow protocol's
// surface by what only the worker needs; the fitting also writes the
// notes of what it leaves out (textclip), which protocol may not import.
// So protocol keeps
// the types and the contract's arithmetic a gateway needs too
// (EventBudget, HeaderRoom, Margin, MinStepDoneBytes: a gateway links no
// package of internal/), and everything that writes or clips the
// worker's bytes is here. wire imports protocol and textclip only: no
// tool, turn or bus.
package wire
