// Package fit is the worker's side of the payload limit
// (docs/protocol.md, "Size limits"): it clips a call.output or a
// step.done until it fits the budget of one message, media first, then
// details and events, then texts, and says in the event what it left out.
package fit
