package gateway_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/category/jobs"
	"github.com/agentbull/toolruntime/internal/category/schedule"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
)

// The gateway's wire types are its own (so that go doc shows their
// fields), and the worker's types are the source of truth: each case is
// a message with every field set, which both types must read strictly
// and write back whole. A field added to the worker's type and not here,
// or the other way round, fails.
func TestWireTypesMatchTheWorkers(t *testing.T) {
	cases := []struct {
		name     string
		msg      string
		worker   any
		gateway  any
		dropType bool // the gateway's type leaves out "type": its Go type says it
	}{
		{"call.output", `{"type":"call.output","agent_id":"a","turn_id":"t","step":1,"call_id":"c","name":"n","namespace":"ns","status":"error",
			"error":{"kind":"tool_error","message":"m"},"item":{"type":"function_call_output","call_id":"c","output":"o"},"details":{"k":1},
			"events":[{"type":"e","data":{"x":1}}],"repairs":["comments"],"activity":"a","duration_ms":3}`,
			&protocol.CallOutput{}, &gateway.CallOutput{}, true},
		{"step.done", `{"type":"step.done","agent_id":"a","turn_id":"t","step":1,"items":[{"type":"function_call_output","call_id":"c","output":"o"}],
			"end_turn":true,"complete_actor_event":true,"task":{"workflow_id":"w","task_id":"q","status":"accepted","result":{"a":1},"instruction":"i","reason":"r"}}`,
			&protocol.StepDone{}, &gateway.StepDone{}, true},
		{"verdict", `{"workflow_id":"w","task_id":"q","status":"repair","result":[1],"instruction":"i","reason":"r"}`,
			&workflowtask.Verdict{}, &gateway.Verdict{}, false},
		{"step.pending", `{"type":"step.pending","agent_id":"a","turn_id":"t","step":3,"approvals":[{"call_id":"c","name":"n","namespace":"ns",
			"arguments":{"x":1},"reason":"destructive","activity":"a"}],"expires_at":"2026-12-02T09:00:00Z"}`,
			&protocol.StepPending{}, &gateway.StepPending{}, true},
		{"approval", `{"agent_id":"a","turn_id":"t","step":3,"decisions":[{"call_id":"c","approved":true,"reason":"r"}]}`,
			&protocol.Approval{}, &struct {
				AgentID   string             `json:"agent_id"`
				TurnID    string             `json:"turn_id"`
				Step      int64              `json:"step"`
				Decisions []gateway.Decision `json:"decisions"`
			}{}, false},
		{"activity", `{"call_id":"c","name":"n","state":"progress","label":"l","progress":{"done":3,"total":10}}`,
			&protocol.Activity{}, &gateway.Activity{}, false},
		{"catalog", `{"tools":[{"type":"function","name":"x"}],"digest":"d","notes":["n"],"approval":["x"]}`,
			&protocol.CatalogReply{}, &gateway.Catalog{}, false},
		{"workflow event", `{"type":"workflow.completed","workflow_id":"w","agent_id":"a","turn_id":"t","task_id":"q","title":"ti",
			"instructions":"i","result":{"a":1},"reason":"r","tasks":[{"task_id":"q","turn_id":"tt","status":"accepted"}],"time":"2026-05-01T10:00:07.456Z"}`,
			&workflowtask.Event{}, &gateway.WorkflowEvent{}, false},
		{"schedule fire", `{"schedule_id":"s","agent_id":"a","name":"n","instructions":"i","kind":"cron","expression":"0 0 9 * * *",
			"time_zone":"Europe/Paris","created_by":{"turn_id":"t","step":2,"call_id":"c"},"created_at":"2026-05-01T10:00:07Z"}`,
			&schedule.Schedule{}, &gateway.ScheduleFire{}, false},
		{"job report", `{"status":"running","seq":2,"progress":{"percent":50,"message":"m"},"result":"r","error":"e"}`,
			&jobs.Report{}, &gateway.JobReport{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := asMap(t, []byte(c.msg))
			for _, v := range []any{c.worker, c.gateway} {
				dec := json.NewDecoder(bytes.NewReader([]byte(c.msg)))
				if c.dropType && v == c.gateway {
					m := asMap(t, []byte(c.msg))
					delete(m, "type")
					b, _ := json.Marshal(m)
					dec = json.NewDecoder(bytes.NewReader(b))
				}
				dec.DisallowUnknownFields()
				if err := dec.Decode(v); err != nil {
					t.Fatalf("%T does not read the message: %v", v, err)
				}
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				got := asMap(t, b)
				w := want
				if c.dropType && v == c.gateway {
					w = asMap(t, []byte(c.msg))
					delete(w, "type")
				}
				if !reflect.DeepEqual(got, w) {
					t.Errorf("%T writes\n%s\nwant the message\n%s", v, b, c.msg)
				}
			}
		})
	}
	// Job events are two worker types in one gateway type.
	for _, msg := range []string{
		`{"type":"job.start","job_id":"j","agent_id":"a","turn_id":"t","title":"ti","instructions":"i","time":"2026-05-01T10:00:07Z"}`,
		`{"type":"job.cancel","job_id":"j","agent_id":"a","reason":"r","time":"2026-05-01T10:00:07Z"}`,
	} {
		var ev gateway.JobEvent
		dec := json.NewDecoder(bytes.NewReader([]byte(msg)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		var worker any = &jobs.StartEvent{}
		if ev.Type == gateway.EventJobCancel {
			worker = &jobs.CancelEvent{}
		}
		if err := json.Unmarshal([]byte(msg), worker); err != nil {
			t.Fatal(err)
		}
		wb, _ := json.Marshal(worker)
		gb, _ := json.Marshal(ev)
		if !reflect.DeepEqual(asMap(t, wb), asMap(t, gb)) {
			t.Errorf("job event: the worker writes %s, the gateway %s", wb, gb)
		}
	}
}

func asMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}
