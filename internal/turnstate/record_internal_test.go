package turnstate

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/turn"
)

// The call record's own encoder writes what json.Marshal writes, byte for
// byte: records are compared by older workers, and read back by readRecord.
func TestRecordEncodeIsMarshal(t *testing.T) {
	hostile := []string{"", "w1", "a\"b", `back\slash`, "<script>&", "tab\there", "\x00\x1f", "é", "\u2028\u2029", "\xff\xfe", "ok~.-_:/"}
	outcomes := []*turn.Outcome{nil,
		{CallID: "c1", Name: "ping", Item: json.RawMessage(`{"type":"function_call_output","call_id":"c1","output":"pong"}`), Duration: 3 * time.Millisecond},
		{CallID: "<&>", Name: "x\u2028", Item: json.RawMessage(` { "a" : [ 1 , 2 ] } `), Details: map[string]any{"k": "v<"}, More: &turn.OutcomeMore{Repairs: []string{"fence"}}, EndTurn: true},
	}
	for _, s := range hostile {
		for _, o := range outcomes {
			for _, rec := range []callRecord{
				{State: "done", Worker: s, Claim: s, Outcome: o, Digest: s},
				{State: s, Outcome: o},
				{State: "claimed", Worker: "w", Claim: s},
			} {
				want, werr := json.Marshal(rec)
				got, gerr := rec.encode()
				if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
					t.Fatalf("encode(%+v) = %s, %v; json.Marshal = %s, %v", rec, got, gerr, want, werr)
				}
				var back callRecord
				if err := json.Unmarshal(got, &back); err != nil {
					t.Fatalf("encode(%+v) = %s, not readable: %v", rec, got, err)
				}
			}
		}
	}
}

func FuzzRecordEncode(f *testing.F) {
	f.Add("done", "w1", "claim", "digest", "c1", `{"output":"x"}`)
	f.Add("", "<&>", "\xff", "\u2028", "", `null`)
	f.Fuzz(func(t *testing.T, state, worker, claim, digest, callID, item string) {
		rec := callRecord{State: state, Worker: worker, Claim: claim, Digest: digest}
		if json.Valid([]byte(item)) {
			rec.Outcome = &turn.Outcome{CallID: callID, Item: json.RawMessage(item)}
		}
		want, werr := json.Marshal(rec)
		got, gerr := rec.encode()
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("encode = %s, %v; json.Marshal = %s, %v", got, gerr, want, werr)
		}
	})
}

func BenchmarkRecordEncode(b *testing.B) {
	rec := callRecord{State: "done", Worker: "w1", Claim: "Zt3kq0aB9xYv", Digest: "sha256-abcdefabcdef",
		Outcome: &turn.Outcome{CallID: "call_1", Name: "ping", Item: json.RawMessage(`{"type":"function_call_output","call_id":"call_1","output":"pong"}`), Duration: time.Millisecond}}
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(rec)
		}
	})
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			_, _ = rec.encode()
		}
	})
}
