package fit

import (
	"fmt"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

// WorkflowEvent clips ev's texts until its encoding is at most budget
// bytes (the publisher calls it for an event over the server's max
// payload): the reason, the instructions and the title. A result is never clipped, as
// its value is the task's answer; results are bounded when submitted
// (workflowtask.Config.MaxResultBytes), well below any max payload.
func WorkflowEvent(ev *protocol.WorkflowEvent, budget int) error {
	ev.Reason = textclip.Reason(ev.Reason)
	ev.Title = textclip.Text(ev.Title, 1<<10)
	ev.Instructions = textclip.Text(ev.Instructions, budget/4)
	if size := jsonLen(ev); size > budget {
		return fmt.Errorf("%w: %s of %s is %d bytes, over %d", protocol.ErrTooLarge, ev.Type, ev.WorkflowID, size, budget)
	}
	return nil
}
