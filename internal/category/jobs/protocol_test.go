package jobs_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/jobs"
	"github.com/agentbull/toolruntime/protocol"
)

// The worker's job messages and protocol's (what a job runner reads and
// writes) are one JSON: each message, with every field set, is read
// strictly by both and written back whole.
func TestMessagesMatchProtocol(t *testing.T) {
	for _, c := range []struct {
		msg          string
		worker, wire any
	}{
		{`{"status":"running","seq":2,"progress":{"percent":50,"message":"m"},"result":"r","error":"e"}`, &jobs.Report{}, &protocol.JobReport{}},
		{`{"type":"job.start","job_id":"j","agent_id":"a","turn_id":"t","title":"ti","instructions":"i","time":"2026-05-01T10:00:07Z"}`, &jobs.StartEvent{}, &protocol.JobEvent{}},
		{`{"type":"job.cancel","job_id":"j","agent_id":"a","reason":"r","time":"2026-05-01T10:00:07Z"}`, &jobs.CancelEvent{}, &protocol.JobEvent{}},
	} {
		for _, v := range []any{c.worker, c.wire} {
			dec := json.NewDecoder(bytes.NewReader([]byte(c.msg)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("%T does not read %s: %v", v, c.msg, err)
			}
			b, _ := json.Marshal(v)
			if !reflect.DeepEqual(asMap(t, b), asMap(t, []byte(c.msg))) {
				t.Errorf("%T writes\n%s\nwant\n%s", v, b, c.msg)
			}
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
