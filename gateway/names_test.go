package gateway_test

import (
	"testing"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/category/jobs"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
)

// The names are written out so that go doc shows them; the worker's are
// the source of truth.
func TestNamesMatchTheWorkers(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{string(gateway.KindText), string(protocol.KindText)},
		{string(gateway.KindWorkflowTask), string(protocol.KindWorkflowTask)},
		{string(gateway.StatusOK), string(protocol.StatusOK)},
		{string(gateway.StatusError), string(protocol.StatusError)},
		{string(gateway.UnknownTool), string(tools.UnknownTool)},
		{string(gateway.NotLoaded), string(tools.NotLoaded)},
		{string(gateway.InvalidArguments), string(tools.InvalidArguments)},
		{string(gateway.ToolError), string(tools.ToolError)},
		{string(gateway.Timeout), string(tools.Timeout)},
		{string(gateway.Aborted), string(tools.Aborted)},
		{string(gateway.Interrupted), string(tools.Interrupted)},
		{string(gateway.Rejected), string(tools.Rejected)},
		{string(gateway.Internal), string(tools.Internal)},
		{string(gateway.VerdictAccepted), string(workflowtask.VerdictAccepted)},
		{string(gateway.VerdictRejected), string(workflowtask.VerdictRejected)},
		{string(gateway.VerdictRepair), string(workflowtask.VerdictRepair)},
		{string(gateway.VerdictFailed), string(workflowtask.VerdictFailed)},
		{string(gateway.VerdictActive), string(workflowtask.VerdictActive)},
		{string(gateway.ActivityStarted), string(protocol.ActivityStarted)},
		{string(gateway.ActivityProgress), string(protocol.ActivityProgress)},
		{string(gateway.ActivityCompleted), string(protocol.ActivityCompleted)},
		{string(gateway.EventWorkflowStarted), string(workflowtask.EventWorkflowStarted)},
		{string(gateway.EventTaskReady), string(workflowtask.EventTaskReady)},
		{string(gateway.EventTaskAccepted), string(workflowtask.EventTaskAccepted)},
		{string(gateway.EventTaskFailed), string(workflowtask.EventTaskFailed)},
		{string(gateway.EventWorkflowCompleted), string(workflowtask.EventWorkflowCompleted)},
		{string(gateway.EventWorkflowCancelled), string(workflowtask.EventWorkflowCancelled)},
		{string(gateway.EventJobStart), string(jobs.EventStart)},
		{string(gateway.EventJobCancel), string(jobs.EventCancel)},
		{string(gateway.JobRunning), string(jobs.StatusRunning)},
		{string(gateway.JobSucceeded), string(jobs.StatusSucceeded)},
		{string(gateway.JobFailed), string(jobs.StatusFailed)},
		{string(gateway.JobCancelled), string(jobs.StatusCancelled)},
	} {
		if c.got != c.want {
			t.Errorf("%q, want the worker's %q", c.got, c.want)
		}
	}
}
