package tool

import "github.com/agentbull/toolruntime/internal/tools"

// Error is the coded error of a call that did not succeed: its Kind and a
// Message written for the model, saying what went wrong and what to do
// about it. The model reads "Error (<kind>): <message>", followed by the
// Result's Content when the tool returned some.
type Error = tools.Error

// Kind classifies why a call did not succeed; the values are the wire
// protocol's error kinds. A tool returns ToolError (the default for any
// error), InvalidArguments (arguments the schema let through but the tool
// cannot use) or Rejected; the worker sets the others.
type Kind = tools.Kind

// The error kinds.
const (
	// ToolError: the tool failed (any error that is not an *Error, and a
	// panic).
	ToolError = tools.ToolError
	// InvalidArguments: the arguments do not fit the tool; the message says
	// what to fix.
	InvalidArguments = tools.InvalidArguments
	// Rejected: the call was refused (by policy or a person).
	Rejected = tools.Rejected
	// Timeout: the call did not finish within its time limit.
	Timeout = tools.Timeout
	// Aborted: the turn was cancelled, or another call ended it first.
	Aborted = tools.Aborted
	// Interrupted: an earlier attempt stopped while the tool ran, and the
	// tool is not read-only, so it is not run again.
	Interrupted = tools.Interrupted
	// UnknownTool: the turn has no tool of that name.
	UnknownTool = tools.UnknownTool
	// NotLoaded: a deferred tool was called before tool search loaded it.
	NotLoaded = tools.NotLoaded
	// Internal: the worker could not run the call.
	Internal = tools.Internal
)

// Errorf returns an *Error of kind with a message for the model. Return it
// from Execute to choose a kind other than ToolError:
//
//	return tool.Result{}, tool.Errorf(tool.InvalidArguments, "no city named %q; give a city's English name", p.City)
func Errorf(kind Kind, format string, args ...any) *Error {
	return tools.Errorf(kind, format, args...)
}
