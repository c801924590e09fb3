package schedule_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/schedule"
	"github.com/agentbull/toolruntime/protocol"
)

// The worker's schedule and protocol's fire (what a gateway reads) are
// one JSON: the message, with every field set, is read
// strictly by both and written back whole.
func TestMessagesMatchProtocol(t *testing.T) {
	for _, c := range []struct {
		msg          string
		worker, wire any
	}{
		{`{"schedule_id":"s","agent_id":"a","name":"n","instructions":"i","kind":"cron","expression":"0 0 9 * * *",
			"time_zone":"Europe/Paris","created_by":{"turn_id":"t","step":2,"call_id":"c"},"created_at":"2026-05-01T10:00:07Z"}`,
			&schedule.Schedule{}, &protocol.ScheduleFire{}},
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
