package tool

import (
	"fmt"

	"github.com/agentbull/toolruntime/protocol"
)

// Kind classifies why a call did not succeed; the values are the wire
// protocol's error kinds ([protocol.ErrorKind]: one type on both sides of
// the wire). A tool returns ToolError (the default for any
// error), InvalidArguments (arguments the schema let through but the tool
// cannot use) or Rejected; the worker sets the others.
type Kind = protocol.ErrorKind

// The error kinds.
const (
	// ToolError: the tool failed (any error that is not an *Error, and a
	// panic).
	ToolError = protocol.ToolError
	// InvalidArguments: the arguments do not fit the tool; the message says
	// what to fix.
	InvalidArguments = protocol.InvalidArguments
	// Rejected: the call was refused (by policy or a person).
	Rejected = protocol.Rejected
	// Timeout: the call did not finish within its time limit.
	Timeout = protocol.Timeout
	// Aborted: the turn was cancelled, or another call ended it first.
	Aborted = protocol.Aborted
	// Interrupted: an earlier attempt stopped while the tool ran, and the
	// tool is not read-only, so it is not run again.
	Interrupted = protocol.Interrupted
	// UnknownTool: the turn has no tool of that name.
	UnknownTool = protocol.UnknownTool
	// NotLoaded: a deferred tool was called before tool search loaded it.
	NotLoaded = protocol.NotLoaded
	// Internal: the worker could not run the call.
	Internal = protocol.Internal
	// AuthRequired: the call needs an account a person has not connected
	// (protocol 1.3); the Error's Auth says where to connect it.
	AuthRequired = protocol.AuthRequired
)

// Error is the coded error of a call that did not succeed. The model reads
// "Error (<kind>): <message>", followed by the Result's Content when the
// tool returned some.
type Error struct {
	Kind Kind `json:"kind"`
	// Message is written for the model: what went wrong and what to do
	// about it.
	Message string `json:"message"`
	// Repairs names the repair-ladder rungs that ran on arguments that were
	// then refused (InvalidArguments only); the worker reports them.
	Repairs []string `json:"-"`
	// Auth, on an error of kind AuthRequired, names the server and the
	// page where a person connects the account: the worker publishes it
	// as an auth.required event before the call's output. It holds no
	// secret.
	Auth *AuthNeeded `json:"auth,omitempty"`
}

// AuthNeeded is where a person connects the account a call needed.
type AuthNeeded struct {
	Server string `json:"server"`
	URL    string `json:"url"`
}

func (e *Error) Error() string { return string(e.Kind) + ": " + e.Message }

// Errorf returns an *Error of kind with a message for the model. Return it
// from Execute to choose a kind other than ToolError:
//
//	return tool.Result{}, tool.Errorf(tool.InvalidArguments, "no city named %q; give a city's English name", p.City)
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}
