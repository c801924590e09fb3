package gateway_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/protocol"
)

// Everything on a turn's subjects is untrusted: whatever the bytes, the
// decoder returns an event of that turn or an *EventError, and never
// panics.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"call.output","agent_id":"a1","turn_id":"t1","step":0,"call_id":"c1","name":"ping","namespace":"","status":"ok","error":null,"item":{"type":"function_call_output","call_id":"c1","output":"pong"},"details":{},"events":[],"repairs":[],"activity":"","duration_ms":0}`,
		`{"type":"call.output","agent_id":"a1","turn_id":"t1","step":0,"call_id":"c1","status":"error","error":{"kind":"aborted","message":"m"},"item":{}}`,
		`{"type":"step.done","agent_id":"a1","turn_id":"t1","step":0,"items":[{"type":"function_call_output"}],"end_turn":false,"complete_actor_event":false,"task":null}`,
		`{"type":"step.done","agent_id":"a1","turn_id":"t1","step":2,"items":[],"end_turn":true,"task":{"workflow_id":"w","task_id":"q","status":"repair","instruction":"Submit."}}`,
		`{"type":"step.pending","agent_id":"a1","turn_id":"t1","step":3,"approvals":[{"call_id":"c7","name":"run_command","arguments":{}}],"expires_at":"2026-12-02T09:00:00Z"}`,
		`{"call_id":"c1","name":"sleep","state":"progress","label":"l","progress":{"done":1,"total":3}}`,
		`{"type":"step.done","agent_id":"a1","turn_id":"t1","step":-1,"items":null}`,
		`{"type":"call.output","agent_id":"a1","turn_id":"t1","step":0,"call_id":"","item":[]}`,
		`null`, `[]`, `{"type":7}`, "\xff",
	} {
		f.Add(0, []byte(s))
		f.Add(1, []byte(s))
	}
	subjects := []string{"turn.call.output.a1.t1", "turn.activity.a1.t1", "turn.call.output.a1", "turn.call.a1.t1"}
	f.Fuzz(func(t *testing.T, which int, data []byte) {
		subject := subjects[uint(which)%uint(len(subjects))]
		ev, err := gateway.DecodeEvent(subject, data)
		if err != nil {
			var bad *gateway.EventError
			if !errors.As(err, &bad) || bad.Reason == "" {
				t.Fatalf("error %v is not an *EventError with a reason", err)
			}
			if ev != nil {
				t.Fatal("an event beside an error")
			}
			return
		}
		switch ev := ev.(type) {
		case *protocol.CallOutput:
			if ev.AgentID != "a1" || ev.TurnID != "t1" || ev.Step < 0 || ev.CallID == "" || (ev.Status == protocol.StatusError && ev.Error == nil) {
				t.Fatalf("accepted %+v", ev)
			}
		case *protocol.StepDone:
			if ev.AgentID != "a1" || ev.TurnID != "t1" || ev.Step < 0 || ev.Items == nil {
				t.Fatalf("accepted %+v", ev)
			}
		case *protocol.StepPending:
			if ev.AgentID != "a1" || ev.TurnID != "t1" || len(ev.Approvals) == 0 {
				t.Fatalf("accepted %+v", ev)
			}
		case *protocol.Activity:
			if subject != "turn.activity.a1.t1" || ev.CallID == "" {
				t.Fatalf("accepted %+v on %s", ev, subject)
			}
		default:
			t.Fatalf("event of type %T", ev)
		}
	})
}

// The durable streams' messages are untrusted too.
func FuzzDecodeStreamMessages(f *testing.F) {
	for _, s := range []string{
		`{"type":"task.ready","workflow_id":"wf_1","agent_id":"a1","turn_id":"task_wf_1_q1","task_id":"q1","instructions":"Answer.","time":"2026-05-01T10:00:00.123Z"}`,
		`{"schedule_id":"sch_1","agent_id":"a1","instructions":"Water.","kind":"at","expression":"2026-05-01T10:00:00Z","created_by":{"turn_id":"t","step":0,"call_id":"c"},"created_at":"2026-05-01T10:00:00Z"}`,
		`{"type":"job.start","job_id":"job_1","agent_id":"a1","turn_id":"t1","title":"T","instructions":"I","time":"2026-05-01T10:00:00Z"}`,
		`{"type":"job.cancel","job_id":"job_1","agent_id":"a1","reason":"r","time":"bad"}`,
		`{}`, `nul`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(err error) {
			var bad *gateway.EventError
			if err != nil && !errors.As(err, &bad) {
				t.Fatalf("error %v is not an *EventError", err)
			}
		}
		if ev, err := gateway.DecodeWorkflowEvent("workflow.event.wf_1", data); err == nil {
			if ev.WorkflowID != "wf_1" || ev.Type == "" {
				t.Fatalf("accepted %+v", ev)
			}
		} else {
			check(err)
		}
		h := nats.Header{}
		h.Set("Nats-Scheduler", "schedule.def.a1.sch_1")
		if f, err := gateway.DecodeScheduleFire("schedule.fire.a1.sch_1", h, data); err == nil {
			if f.AgentID != "a1" || f.ScheduleID != "sch_1" || f.Instructions == "" || f.Scheduler == "" || f.TurnID() == "" {
				t.Fatalf("accepted %+v", f)
			}
		} else {
			check(err)
		}
		if ev, err := gateway.DecodeJobEvent("job.start.a1.job_1", data); err == nil {
			if ev.Type != protocol.EventJobStart || ev.JobID != "job_1" {
				t.Fatalf("accepted %+v", ev)
			}
		} else {
			check(err)
		}
	})
}
