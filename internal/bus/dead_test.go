package bus

import (
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/protocol"
)

func TestDeadLetterFitsMaxPayload(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	small := nats.Header{"X-Trace": []string{"abc"}}
	huge := nats.Header{"X-Big": []string{strings.Repeat("h", 700<<10)}}
	cases := []struct {
		name      string
		h         nats.Header
		data      []byte
		truncated bool
		dropped   bool
	}{
		{"fits whole", small, []byte("not json"), false, false},
		{"body at the limit", small, []byte(strings.Repeat("b", limit-100)), true, false},
		{"headers most of it", huge, []byte(strings.Repeat("b", 400<<10)), true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reason := "malformed step: line one\r\nline two " + strings.Repeat("r", 10<<10)
			m := deadLetter("turn.call.a.t", c.h, c.data, "TURN_CALLS", 7, reason, limit)
			if n := headerLen(m.Header) + len(m.Data); n > limit {
				t.Fatalf("dead letter of %d bytes, over %d", n, limit)
			}
			if got := m.Header.Get(protocol.HeaderDeadTruncated) == "true"; got != c.truncated {
				t.Errorf("truncated %v, want %v", got, c.truncated)
			}
			if got := m.Header.Get(protocol.HeaderDeadHeadersDropped) != ""; got != c.dropped {
				t.Errorf("headers dropped %v, want %v", got, c.dropped)
			}
			if c.truncated && m.Header.Get(protocol.HeaderDeadSize) != strconv.Itoa(len(c.data)) {
				t.Errorf("%s %q, want %d", protocol.HeaderDeadSize, m.Header.Get(protocol.HeaderDeadSize), len(c.data))
			}
			if !strings.HasPrefix(string(c.data), string(m.Data)) || len(m.Data) == 0 {
				t.Errorf("body of %d bytes is not the head of the message", len(m.Data))
			}
			r := m.Header.Get(protocol.HeaderDeadReason)
			if strings.ContainsAny(r, "\r\n") || len(r) > maxDeadReason || !strings.HasPrefix(r, "malformed step: line one") {
				t.Errorf("reason header of %d bytes: %.80q", len(r), r)
			}
			if m.Header.Get(protocol.HeaderDeadStreamSeq) != "7" || m.Header.Get("Nats-Msg-Id") != "dead.TURN_CALLS.7" {
				t.Errorf("headers %v", m.Header)
			}
		})
	}
}

func TestDeadSubject(t *testing.T) {
	t.Parallel()
	for subject, want := range map[string]string{
		"turn.call.a1.t1":                 "turn.dead.a1.t1",
		"turn.approval.a1.t1":             "turn.dead.a1.t1",
		"turn.approval.timeout.a1.t1.3":   "turn.dead.a1.t1",
		"turn.approval.timeout.a1.t1.x":   "turn.dead.a1.t1",
		"turn.approval.cancel.a1.t1":      "turn.dead.a1.t1",
		"turn.approval.cancel.a1.t1.x":    "turn.dead._._",
		"turn.approval.timeout.a1.t1.3.4": "turn.dead._._",
		"turn.approval.timeout.a$1.t1.3":  "turn.dead._._",
		"turn.approval.other.a1.t1":       "turn.dead._._",
		"turn.approval.timer.a1.t1.3":     "turn.dead._._",
	} {
		if got := deadSubject(subject); got != want {
			t.Errorf("%s: %s, want %s", subject, got, want)
		}
	}
}
