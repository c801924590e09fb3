package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Names of the streams, consumers, buckets, subject prefixes and headers
// of workflows, schedules and background jobs.
const (
	// StreamSchedules holds the schedules; a schedule fires on
	// schedule.fire.<agent_id>.<schedule_id> (PrefixScheduleFire).
	StreamSchedules    = "SCHEDULES"
	PrefixScheduleDef  = "schedule.def"
	PrefixScheduleFire = "schedule.fire"
	// HeaderScheduler (the schedule's subject) and HeaderScheduleNext
	// (the next fire time in RFC 3339, or "purge" after the last one) are
	// the server's headers of a fired schedule (nats-server 2.12).
	HeaderScheduler    = "Nats-Scheduler"
	HeaderScheduleNext = "Nats-Schedule-Next"

	// StreamJobs holds job.start, job.cancel and job.report messages,
	// each on <prefix>.<agent_id>.<job_id>; BucketJobs the job records.
	StreamJobs         = "JOB_EVENTS"
	BucketJobs         = "JOBS"
	ConsumerJobReports = "job-reports"
	PrefixJobStart     = "job.start"
	PrefixJobCancel    = "job.cancel"
	PrefixJobReport    = "job.report"
)

// WorkflowEvent is an event on workflow.event.<workflow_id>. Which fields
// are set depends on Type: TaskID and Instructions for task.ready, Result
// for task.accepted, Reason for task.failed and workflow.cancelled,
// Tasks for workflow.*. TurnID is the task turn's id in task.* events and
// the main turn that started the workflow in workflow.* events.
type WorkflowEvent struct {
	Type         string          `json:"type"`
	WorkflowID   string          `json:"workflow_id"`
	AgentID      string          `json:"agent_id"`
	TurnID       string          `json:"turn_id"`
	TaskID       string          `json:"task_id,omitempty"`
	Title        string          `json:"title,omitempty"`
	Instructions string          `json:"instructions,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	Tasks        []WorkflowTask  `json:"tasks,omitempty"`
	Time         time.Time       `json:"time"`
}

// WorkflowTask is a task's status in a workflow.* event.
type WorkflowTask struct {
	TaskID string `json:"task_id"`
	TurnID string `json:"turn_id"`
	Status string `json:"status"`
}

// Workflow event types, in [WorkflowEvent].Type.
const (
	EventWorkflowStarted   = "workflow.started"
	EventTaskReady         = "task.ready"
	EventTaskAccepted      = "task.accepted"
	EventTaskFailed        = "task.failed"
	EventWorkflowCompleted = "workflow.completed"
	EventWorkflowCancelled = "workflow.cancelled"
)

// TaskContext is the context of the task turn a task.ready event starts,
// with the given bindings (only web and brain count in a task turn).
func (e *WorkflowEvent) TaskContext(bindings map[string]bool) Context {
	return Context{Kind: KindWorkflowTask, Bindings: bindings, WorkflowID: e.WorkflowID, TaskID: e.TaskID}
}

// ScheduleFire is a schedule that fired: start a main turn for AgentID
// with Instructions as the user message.
type ScheduleFire struct {
	ScheduleID   string `json:"schedule_id"`
	AgentID      string `json:"agent_id"`
	Name         string `json:"name,omitempty"`
	Instructions string `json:"instructions"`
	// Kind is at, every or cron; Expression the time, interval or cron
	// expression; TimeZone the cron's zone (empty: UTC).
	Kind       string    `json:"kind"`
	Expression string    `json:"expression"`
	TimeZone   string    `json:"time_zone,omitempty"`
	CreatedBy  CallRef   `json:"created_by"`
	CreatedAt  time.Time `json:"created_at"`
	// Scheduler (the schedule's subject) and Next (the next fire time, or
	// "purge" after the last one) are the server's headers of the fire;
	// together they name the slot that fired.
	Scheduler string `json:"-"`
	Next      string `json:"-"`
}

// CallRef names one function call of a turn: the call that created a
// schedule or a job, or last wrote a brain page.
type CallRef struct {
	TurnID string `json:"turn_id"`
	Step   int64  `json:"step"`
	CallID string `json:"call_id"`
}

// TurnID is a turn id for the turn this fire starts, the same for every
// delivery of the fire: a gateway that starts the turn again after a
// redelivery publishes the same step ids, which the stream drops.
func (f *ScheduleFire) TurnID() string {
	sum := sha256.Sum256([]byte(f.Scheduler + "\x00" + f.Next))
	return "fire_" + f.ScheduleID + "_" + hex.EncodeToString(sum[:8])
}

// JobEvent is what the worker asks of the job runner: Type
// [EventJobStart] (run the job: Title, Instructions) or [EventJobCancel]
// (stop it: Reason). The runner reports back with a [JobReport] on
// job.report.<agent_id>.<job_id> (gateway.Client.ReportJob).
type JobEvent struct {
	Type         string    `json:"type"`
	JobID        string    `json:"job_id"`
	AgentID      string    `json:"agent_id"`
	TurnID       string    `json:"turn_id,omitempty"`
	Title        string    `json:"title,omitempty"`
	Instructions string    `json:"instructions,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	Time         time.Time `json:"time"`
}

// Job event types, in [JobEvent].Type.
const (
	EventJobStart  = "job.start"
	EventJobCancel = "job.cancel"
)

// JobReport is the runner's report on a job: Status running (with
// Progress), then succeeded (Result), failed (Error) or cancelled. Seq
// orders one job's reports (1, 2, …): a report whose Seq is not above the
// last one applied is ignored.
type JobReport struct {
	Status   string       `json:"status"`
	Seq      int64        `json:"seq,omitempty"`
	Progress *JobProgress `json:"progress,omitempty"`
	Result   string       `json:"result,omitempty"`
	Error    string       `json:"error,omitempty"`
}

// JobProgress is how far a running job is: Percent 0-100 when known.
type JobProgress struct {
	Percent *float64 `json:"percent,omitempty"`
	Message string   `json:"message,omitempty"`
}

// Job statuses, in [JobReport].Status.
const (
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)
