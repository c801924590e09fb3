package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/protocol"
)

// The streams below are durable work for a fleet of gateways: each
// method creates (or updates) a durable consumer named by the caller, so
// that gateways sharing the name share the work and one that restarts
// goes on where the fleet left off. A message is acknowledged when its
// handler returns nil; a handler error has it delivered again after a
// while; a malformed message is terminated and logged, never handed on.
// A handler that runs long keeps its message in progress; still, start
// the turn and return rather than drive it inside the handler.

// WorkflowEvents consumes every workflow event (stream WORKFLOW_EVENTS)
// until ctx ends, and returns ctx's error. A [protocol.EventTaskReady] event
// starts a task turn: its TurnID is the task turn's id, Instructions the
// first user message, and [protocol.WorkflowEvent.TaskContext] its context.
func (c *Client) WorkflowEvents(ctx context.Context, durable string, handle func(context.Context, *protocol.WorkflowEvent) error) error {
	return c.consume(ctx, protocol.StreamWorkflows, durable, []string{protocol.PrefixWFEvt + ".*"}, func(ctx context.Context, m jetstream.Msg) error {
		ev, err := DecodeWorkflowEvent(m.Subject(), m.Data())
		if err != nil {
			return err
		}
		return handle(ctx, ev)
	})
}

// DecodeWorkflowEvent decodes a message of workflow.event.<workflow_id>;
// anything malformed is an *EventError.
func DecodeWorkflowEvent(subject string, data []byte) (*protocol.WorkflowEvent, error) {
	bad := func(format string, args ...any) (*protocol.WorkflowEvent, error) {
		return nil, &EventError{Subject: subject, Reason: fmt.Sprintf(format, args...)}
	}
	var ev protocol.WorkflowEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return bad("not a workflow event object: %v", err)
	}
	switch {
	case subject != protocol.PrefixWFEvt+"."+ev.WorkflowID || !protocol.ValidID(ev.WorkflowID):
		return bad("workflow_id %q disagrees with the subject", ev.WorkflowID)
	case ev.Type == "":
		return bad("type is missing")
	case !protocol.ValidID(ev.AgentID) || !protocol.ValidID(ev.TurnID):
		return bad("agent_id or turn_id is not 1-64 characters of [A-Za-z0-9_-]")
	case strings.HasPrefix(ev.Type, "task.") && !protocol.ValidID(ev.TaskID):
		return bad("%s without a valid task_id", ev.Type)
	case ev.Type == protocol.EventTaskReady && ev.Instructions == "":
		return bad("task.ready without instructions")
	}
	return &ev, nil
}

// ScheduleFires consumes fired schedules (stream SCHEDULES, subjects
// schedule.fire.<agent_id>.<schedule_id>) until ctx ends, and returns
// ctx's error. A fire can be late, never doubled; its TurnID makes a
// redelivered one start the same turn.
func (c *Client) ScheduleFires(ctx context.Context, durable string, handle func(context.Context, *protocol.ScheduleFire) error) error {
	return c.consume(ctx, protocol.StreamSchedules, durable, []string{protocol.PrefixScheduleFire + ".*.*"}, func(ctx context.Context, m jetstream.Msg) error {
		f, err := DecodeScheduleFire(m.Subject(), m.Headers(), m.Data())
		if err != nil {
			return err
		}
		return handle(ctx, f)
	})
}

// DecodeScheduleFire decodes a fired schedule message; anything
// malformed is an *EventError.
func DecodeScheduleFire(subject string, h nats.Header, data []byte) (*protocol.ScheduleFire, error) {
	bad := func(format string, args ...any) (*protocol.ScheduleFire, error) {
		return nil, &EventError{Subject: subject, Reason: fmt.Sprintf(format, args...)}
	}
	var f protocol.ScheduleFire
	if err := json.Unmarshal(data, &f); err != nil {
		return bad("not a schedule object: %v", err)
	}
	switch {
	case !protocol.ValidID(f.AgentID) || !protocol.ValidID(f.ScheduleID):
		return bad("agent_id or schedule_id is not 1-64 characters of [A-Za-z0-9_-]")
	case subject != protocol.PrefixScheduleFire+"."+f.AgentID+"."+f.ScheduleID:
		return bad("ids disagree with the subject")
	case f.Instructions == "":
		return bad("instructions are missing")
	}
	f.Scheduler, f.Next = h.Get(protocol.HeaderScheduler), h.Get(protocol.HeaderScheduleNext)
	return &f, nil
}

// JobEvents consumes job.start and job.cancel (stream JOB_EVENTS) until
// ctx ends, and returns ctx's error: the job runner's side of the
// background_jobs binding.
func (c *Client) JobEvents(ctx context.Context, durable string, handle func(context.Context, *protocol.JobEvent) error) error {
	filters := []string{protocol.PrefixJobStart + ".*.*", protocol.PrefixJobCancel + ".*.*"}
	return c.consume(ctx, protocol.StreamJobs, durable, filters, func(ctx context.Context, m jetstream.Msg) error {
		ev, err := DecodeJobEvent(m.Subject(), m.Data())
		if err != nil {
			return err
		}
		return handle(ctx, ev)
	})
}

// DecodeJobEvent decodes a job.start or job.cancel message; anything
// malformed is an *EventError.
func DecodeJobEvent(subject string, data []byte) (*protocol.JobEvent, error) {
	bad := func(format string, args ...any) (*protocol.JobEvent, error) {
		return nil, &EventError{Subject: subject, Reason: fmt.Sprintf(format, args...)}
	}
	var ev protocol.JobEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return bad("not a job event object: %v", err)
	}
	switch {
	case ev.Type != protocol.EventJobStart && ev.Type != protocol.EventJobCancel:
		return bad("type %q is neither %s nor %s", ev.Type, protocol.EventJobStart, protocol.EventJobCancel)
	case !protocol.ValidID(ev.AgentID) || !protocol.ValidID(ev.JobID):
		return bad("agent_id or job_id is not 1-64 characters of [A-Za-z0-9_-]")
	case subject != protocol.Subject(ev.Type, ev.AgentID, ev.JobID):
		return bad("type and ids disagree with the subject")
	}
	return &ev, nil
}

// ReportJob publishes a job runner's report on
// job.report.<agent_id>.<job_id>, with message id <job_id>.report.<seq>
// when Seq is set, so that a report sent twice is stored once.
func (c *Client) ReportJob(ctx context.Context, agentID, jobID string, r protocol.JobReport) error {
	if !protocol.ValidID(agentID) || !protocol.ValidID(jobID) {
		return fmt.Errorf("report job: agent and job ids must be 1-64 characters of [A-Za-z0-9_-]")
	}
	m := nats.NewMsg(protocol.Subject(protocol.PrefixJobReport, agentID, jobID))
	var err error
	if m.Data, err = json.Marshal(r); err != nil {
		return err
	}
	if r.Seq > 0 {
		m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s.report.%d", jobID, r.Seq))
	}
	return c.publish(ctx, m)
}

// consumeAckWait is the ack wait of the durable consumers; a running
// handler's message is kept in progress at half of it.
const consumeAckWait = 30 * time.Second

// consume runs handle on every message of a durable consumer until ctx
// ends. A handler's *EventError terminates the message; any other error
// has it delivered again after a delay.
func (c *Client) consume(ctx context.Context, stream, durable string, filters []string, handle func(context.Context, jetstream.Msg) error) error {
	if durable == "" {
		return errors.New("gateway: a durable consumer name is required")
	}
	cons, err := c.durableConsumer(ctx, stream, durable, filters)
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
		}
		it.Stop()
	}()
	for {
		m, err := it.Next()
		switch {
		case ctx.Err() != nil:
			return ctx.Err() // an unsettled message is delivered again
		case errors.Is(err, jetstream.ErrMsgIteratorClosed), errors.Is(err, nats.ErrConnectionClosed):
			return fmt.Errorf("consumer %s on %s: %w", durable, stream, err)
		case err != nil:
			// Missed heartbeats and the like: the iterator goes on by
			// itself; a pause keeps a persistent one from spinning.
			c.log.Warn("reading a consumer", "stream", stream, "consumer", durable, "err", err)
			if pause(ctx, 100*time.Millisecond) != nil {
				return ctx.Err()
			}
			continue
		}
		c.handleOne(ctx, m, handle)
	}
}

// durableConsumer creates or updates the durable consumer. A stream that
// does not exist yet (no worker has started) is waited for: gateways and
// workers may start in any order.
func (c *Client) durableConsumer(ctx context.Context, stream, durable string, filters []string) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		Durable: durable, FilterSubjects: filters, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: consumeAckWait, DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	for logged := false; ; {
		setup, cancel := c.bounded(ctx)
		cons, err := c.js.CreateOrUpdateConsumer(setup, stream, cfg)
		cancel()
		switch {
		case err == nil:
			return cons, nil
		case !errors.Is(err, jetstream.ErrStreamNotFound):
			return nil, fmt.Errorf("consumer %s on %s: %w", durable, stream, err)
		case !logged:
			c.log.Info("waiting for a worker to create the stream", "stream", stream)
			logged = true
		}
		if pause(ctx, time.Second) != nil {
			return nil, ctx.Err() // the documented error, not the cause
		}
	}
}

// handleOne runs handle on m, keeping m in progress meanwhile, and
// settles it by the handler's answer.
func (c *Client) handleOne(ctx context.Context, m jetstream.Msg, handle func(context.Context, jetstream.Msg) error) {
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(consumeAckWait / 2)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	err := safeHandle(ctx, m, handle)
	close(stop)
	var bad *EventError
	switch {
	case err == nil:
		_ = m.Ack()
	case errors.As(err, &bad):
		c.log.Warn("terminating a malformed message", "subject", m.Subject(), "err", err)
		_ = m.TermWithReason(bad.Reason)
	default:
		c.log.Warn("a handler failed; the message is delivered again", "subject", m.Subject(), "err", err)
		// 1 s, doubling with each delivery, at most 30 s.
		delay := time.Second
		if md, mdErr := m.Metadata(); mdErr == nil && md.NumDelivered > 1 {
			delay = min(time.Second<<min(md.NumDelivered-1, 5), 30*time.Second)
		}
		_ = m.NakWithDelay(delay)
	}
}

// safeHandle turns a handler's panic into an error: a bad message must
// not stop the consumer of everything after it.
func safeHandle(ctx context.Context, m jetstream.Msg, handle func(context.Context, jetstream.Msg) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("handler panicked: %v", v)
		}
	}()
	return handle(ctx, m)
}
