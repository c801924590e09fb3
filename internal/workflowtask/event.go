package workflowtask

import (
	"context"
	"fmt"

	"github.com/agentbull/toolruntime/protocol"
)

// EventPublisher stores an event in its stream under a message id, and
// returns once it is stored. *bus.Publisher implements it.
type EventPublisher interface {
	Event(ctx context.Context, subject, msgID string, v any) error
}

// publish sends ev on its workflow's subject. Every event has a fixed
// message id, so publishing one again (a redelivered step finishing what
// an earlier attempt began) is dropped by the stream's duplicate window.
func (s *Service) publish(ctx context.Context, ev *protocol.WorkflowEvent) error {
	var id string
	switch ev.Type {
	case protocol.EventTaskReady:
		id = eventMsgID(ev.WorkflowID, ev.TaskID, "ready")
	case protocol.EventTaskAccepted:
		id = eventMsgID(ev.WorkflowID, ev.TaskID, "accepted")
	case protocol.EventTaskFailed:
		id = eventMsgID(ev.WorkflowID, ev.TaskID, "failed")
	case protocol.EventWorkflowStarted:
		id = eventMsgID(ev.WorkflowID, "started")
	case protocol.EventWorkflowCompleted:
		id = eventMsgID(ev.WorkflowID, "completed")
	case protocol.EventWorkflowCancelled:
		id = eventMsgID(ev.WorkflowID, "cancelled")
	default:
		return fmt.Errorf("unknown workflow event type %q", ev.Type)
	}
	if err := s.events.Event(ctx, subjectOf(ev.WorkflowID), id, ev); err != nil {
		return fmt.Errorf("publishing %s of %s: %w", ev.Type, ev.WorkflowID, err)
	}
	return nil
}

// taskEvent is the task.accepted or task.failed event of an ended task.
// Its time comes from the record, as workflowEvent's does, so that a
// republished event is identical to the first.
func taskEvent(t *Task) *protocol.WorkflowEvent {
	ev := &protocol.WorkflowEvent{WorkflowID: t.WorkflowID, AgentID: t.AgentID, TurnID: t.TurnID, TaskID: t.TaskID}
	if t.EndedAt != nil {
		ev.Time = *t.EndedAt
	}
	switch t.Status {
	case TaskAccepted:
		ev.Type, ev.Result = protocol.EventTaskAccepted, t.Result
	default:
		ev.Type, ev.Reason = protocol.EventTaskFailed, t.Reason
	}
	return ev
}

// workflowEvent is a workflow.* event of wf.
func workflowEvent(typ string, wf *Workflow) *protocol.WorkflowEvent {
	ev := &protocol.WorkflowEvent{Type: typ, WorkflowID: wf.ID, AgentID: wf.AgentID, TurnID: wf.TurnID, Title: wf.Title, Tasks: wf.Tasks, Time: wf.CreatedAt}
	if wf.EndedAt != nil && typ != protocol.EventWorkflowStarted {
		ev.Time = *wf.EndedAt
	}
	if typ == protocol.EventWorkflowCancelled {
		ev.Reason = wf.Reason
	}
	return ev
}

// settle reports a task that has ended: its task.accepted or task.failed
// event, then its status in the workflow's ledger, then, when that made
// the last open task end, workflow.completed. Each step is idempotent,
// so a redelivered step calls settle again to finish what a crash cut
// short.
func (s *Service) settle(ctx context.Context, t *Task) error {
	if err := s.publish(ctx, taskEvent(t)); err != nil {
		return err
	}
	now := s.now()
	wf, err := s.store.updateWorkflow(ctx, t.WorkflowID, func(wf *Workflow) (bool, error) {
		changed := false
		allEnded := true
		for i := range wf.Tasks {
			ref := &wf.Tasks[i]
			if ref.TaskID == t.TaskID && ref.Status != t.Status {
				ref.Status = t.Status
				changed = true
			}
			if ref.Status != TaskAccepted && ref.Status != TaskFailed {
				allEnded = false
			}
		}
		if allEnded && wf.Status == WorkflowRunning {
			wf.Status, wf.EndedAt = WorkflowCompleted, &now
			changed = true
		}
		return changed, nil
	})
	if err != nil {
		return fmt.Errorf("recording the end of task %s in workflow %s: %w", t.TaskID, t.WorkflowID, err)
	}
	if wf.Status == WorkflowCompleted {
		return s.publish(ctx, workflowEvent(protocol.EventWorkflowCompleted, wf))
	}
	return nil
}
