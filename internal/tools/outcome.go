package tools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentbull/toolruntime/tool"
)

// Classify decides the error kind of a run that failed with err, in
// callCtx (the call's context, made under parent): the clock and the
// parent's end take precedence over whatever the tool said about them. A
// call whose time was up is a timeout (after timeout, its limit); one
// whose parent ended (the turn's abort) is aborted, with the parent's
// cause; otherwise the tool's own *tool.Error stands, and any other error
// is a tool_error with its text.
func Classify(err error, callCtx, parent context.Context, timeout time.Duration) *tool.Error {
	if context.Cause(callCtx) == ErrTimedOut && parent.Err() == nil {
		return tool.Errorf(tool.Timeout, "The call did not finish within %s and was stopped.", timeout)
	}
	if parent.Err() != nil {
		return tool.Errorf(tool.Aborted, "The call was aborted: %v.", context.Cause(parent))
	}
	var te *tool.Error
	if errors.As(err, &te) {
		return te
	}
	return &tool.Error{Kind: tool.ToolError, Message: err.Error()}
}

// FailureText is what the model reads of a call that ended with e:
// "Error (<kind>): <message>", followed by the content the tool returned
// beside its error, if any.
func FailureText(e *tool.Error, content string) string {
	text := fmt.Sprintf("Error (%s): %s", e.Kind, e.Message)
	if content != "" {
		text += "\n" + content
	}
	return text
}
