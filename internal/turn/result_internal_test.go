package turn

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

func checkOutcomeJSON(t *testing.T, o Outcome) {
	t.Helper()
	want, werr := o.marshal()
	got, gerr := o.MarshalJSON()
	if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("MarshalJSON(%+v) = %s, %v; json.Marshal = %s, %v", o, got, gerr, want, werr)
	}
}

// The journal's record of an outcome is what json.Marshal wrote before it
// was written field by field, byte for byte: records are compared by
// workers of other versions.
func TestOutcomeJSONIsMarshal(t *testing.T) {
	hostile := []string{"", "c1", "a\"b", `back\slash`, "<script>&", "\x00\x1f", "é", "\u2028\u2029", "\xff\xfe"}
	raws := []json.RawMessage{nil, {}, json.RawMessage(`{"type":"function_call_output","call_id":"c1","output":"pong"}`),
		json.RawMessage(` { "a" : [ 1 , 2 ] } `), json.RawMessage(`"<&>"`), json.RawMessage(`{"a":`)}
	for _, s := range hostile {
		for _, raw := range raws {
			for _, o := range []Outcome{
				{CallID: s, Name: s, Namespace: s, Item: raw, Duration: 1500 * time.Microsecond},
				{CallID: s, Item: raw, Repairs: []string{s, "fence"}, Activity: s, EndTurn: true, Complete: true, Loaded: []string{s}, MediaNotes: []string{"", s}, Duration: -time.Second},
				{Item: raw, Repairs: []string{}, Loaded: []string{}, MediaNotes: []string{}, Replayed: true, Ran: true, Reused: true, bounded: true},
				{Item: raw, Err: &tool.Error{Kind: tool.ToolError, Message: s}},
				{Item: raw, Details: map[string]any{"k": s}},
				{Item: raw, Events: []protocol.PresentationEvent{{Type: s}}},
				{Item: raw, Events: []protocol.PresentationEvent{}},
			} {
				checkOutcomeJSON(t, o)
			}
		}
	}
}

func FuzzOutcomeJSON(f *testing.F) {
	f.Add("c1", "ping", `{"type":"function_call_output","call_id":"c1","output":"pong"}`, int64(3), true)
	f.Add("<&>", "\xff\u2028", ` [ 1 ] `, int64(-1), false)
	f.Fuzz(func(t *testing.T, id, name, raw string, ms int64, flag bool) {
		o := Outcome{CallID: id, Name: name, Namespace: name, Item: json.RawMessage(raw), Duration: time.Duration(ms) * time.Millisecond}
		if flag {
			o.Repairs, o.Activity, o.EndTurn, o.Loaded, o.MediaNotes = []string{id}, name, true, []string{name, id}, []string{id}
		}
		checkOutcomeJSON(t, o)
	})
}

func BenchmarkOutcomeJSON(b *testing.B) {
	o := Outcome{CallID: "c0", Name: "ping", Item: json.RawMessage(`{"type":"function_call_output","call_id":"c0","output":"pong"}`), Activity: "Pinging", Duration: time.Millisecond}
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = o.marshal()
		}
	})
	b.Run("MarshalJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = o.MarshalJSON()
		}
	})
}
