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
	// What the Outcome wrote when its rare fields were its own (before
	// OutcomeMore): records are compared by workers of other versions.
	before, berr := json.Marshal(struct {
		outcomeBefore
		DurationMS int64 `json:"duration_ms"`
	}{outcomeBefore{o.CallID, o.Name, o.Namespace, o.Err, o.Item, o.Details, o.Events(), o.Repairs(), o.Activity,
		o.EndTurn, o.Complete, o.Loaded(), o.MediaNotes()}, o.Duration.Milliseconds()})
	if (berr == nil) != (gerr == nil) || !bytes.Equal(got, before) {
		t.Fatalf("MarshalJSON(%+v) = %s, %v; the record before = %s, %v", o, got, gerr, before, berr)
	}
	if gerr != nil {
		return
	}
	// Read back, it is what the record before read back as.
	var back Outcome
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("%s does not read back: %v", got, err)
	}
	var old struct {
		outcomeBefore
		DurationMS int64 `json:"duration_ms"`
	}
	if err := json.Unmarshal(got, &old); err != nil {
		t.Fatal(err)
	}
	want, _ = json.Marshal(old)
	if again, err := back.marshal(); err != nil || !bytes.Equal(again, want) {
		t.Fatalf("%s read back writes %s, %v; the record before read back writes %s", got, again, err, want)
	}
}

// outcomeBefore is the journal's record of an Outcome with every field
// its own, as it was written before OutcomeMore.
type outcomeBefore struct {
	CallID     string                       `json:"call_id"`
	Name       string                       `json:"name"`
	Namespace  string                       `json:"namespace"`
	Err        *tool.Error                  `json:"error,omitempty"`
	Item       json.RawMessage              `json:"item"`
	Details    any                          `json:"details,omitempty"`
	Events     []protocol.PresentationEvent `json:"events,omitempty"`
	Repairs    []string                     `json:"repairs,omitempty"`
	Activity   string                       `json:"activity,omitempty"`
	EndTurn    bool                         `json:"end_turn,omitempty"`
	Complete   bool                         `json:"complete_actor_event,omitempty"`
	Loaded     []string                     `json:"loaded,omitempty"`
	MediaNotes []string                     `json:"media_notes,omitempty"`
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
				{CallID: s, Item: raw, More: &OutcomeMore{Repairs: []string{s, "fence"}, Loaded: []string{s}, MediaNotes: []string{"", s}}, Activity: s, EndTurn: true, Complete: true, Duration: -time.Second},
				{Item: raw, More: &OutcomeMore{Repairs: []string{}, Loaded: []string{}, MediaNotes: []string{}}, Replayed: true, Ran: true, Reused: true, bounded: true},
				{Item: raw, More: &OutcomeMore{}},
				{Item: raw, Err: &tool.Error{Kind: tool.ToolError, Message: s}},
				{Item: raw, Details: map[string]any{"k": s}},
				{Item: raw, More: &OutcomeMore{Events: []protocol.PresentationEvent{{Type: s}}}},
				{Item: raw, More: &OutcomeMore{Events: []protocol.PresentationEvent{}}},
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
			o.Activity, o.EndTurn = name, true
			o.More = &OutcomeMore{Repairs: []string{id}, Loaded: []string{name, id}, MediaNotes: []string{id}}
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
