package bus

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

// checkMarshalEvent fails t unless marshalEvent(v) writes what
// json.Marshal(v) writes, or fails as it does.
func checkMarshalEvent(t *testing.T, v any) {
	t.Helper()
	want, werr := json.Marshal(v)
	got, gerr := marshalEvent(v)
	if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("marshalEvent(%+v) = %s, %v; json.Marshal = %s, %v", v, got, gerr, want, werr)
	}
	// Into a buffer that holds something already (a pooled one is reused
	// from its start): the event goes after it.
	buf := make([]byte, 3, 8)
	copy(buf, "pre")
	got, gerr = appendEvent(buf, v)
	if (werr == nil) != (gerr == nil) || werr == nil && string(got) != "pre"+string(want) {
		t.Fatalf("appendEvent(pre, %+v) = %s, %v; json.Marshal = %s, %v", v, got, gerr, want, werr)
	}
}

// call.output and step.done are written as json.Marshal writes them, byte
// for byte: the gateway and the stream's duplicate window see no change.
func TestMarshalEventIsMarshal(t *testing.T) {
	hostile := []string{"", "c1", "a\"b", `back\slash`, "<script>&", "tab\there", "\x00\x1f", "é", "\u2028\u2029", "\xff\xfe", "ok~.-_:/"}
	raws := []json.RawMessage{nil, {}, json.RawMessage(`{"type":"function_call_output","call_id":"c1","output":"pong"}`),
		json.RawMessage(` { "a" : [ 1 , 2 ] } `), json.RawMessage(`"<&>"`), json.RawMessage(`"\u2028 "`), json.RawMessage("\"\u2028\""),
		json.RawMessage(`{"a":`), json.RawMessage(`1 2`), json.RawMessage(`null`), json.RawMessage("\"\xff\"")}
	for _, s := range hostile {
		for _, raw := range raws {
			for _, ev := range []*protocol.CallOutput{
				{Type: protocol.EventCallOutput, AgentID: s, TurnID: s, Step: 3, CallID: s, Name: s, Namespace: s, Status: s, Item: raw, Activity: s, DurationMS: -1},
				{Type: s, Step: -9, Error: &protocol.CallError{Kind: protocol.ErrorKind(s), Message: s}, Item: raw, Details: raw, Repairs: []string{s, "fence"}},
				{Item: raw, Events: []protocol.PresentationEvent{}, Repairs: []string{}},
				{Item: raw, Events: []protocol.PresentationEvent{{Type: s, Data: raw}}},
				{Item: raw, Version: "v", MediaNotes: []string{"n"}},
			} {
				checkMarshalEvent(t, ev)
			}
			for _, ev := range []*protocol.StepDone{
				{Type: protocol.EventStepDone, AgentID: s, TurnID: s, Step: 1 << 62, Items: []json.RawMessage{raw}, EndTurn: true},
				{Type: s, Items: []json.RawMessage{raw, nil, json.RawMessage(`[]`)}, CompleteActorEvent: true, Version: "v"},
				{Items: []json.RawMessage{}},
				{},
				{Items: []json.RawMessage{raw}, Task: &protocol.Verdict{Status: s, Result: raw}},
			} {
				checkMarshalEvent(t, ev)
			}
		}
	}
	checkMarshalEvent(t, (*protocol.CallOutput)(nil))
	checkMarshalEvent(t, (*protocol.StepDone)(nil))
	checkMarshalEvent(t, &protocol.WorkflowEvent{})
}

func FuzzMarshalEvent(f *testing.F) {
	f.Add("c1", "ping", "tool_error", `{"type":"function_call_output","call_id":"c1","output":"pong"}`, int64(3), true)
	f.Add("<&>", "\xff", "\u2028", ` { "a" : [1, 2] } `, int64(-1), false)
	f.Add("", "", "", `{"a":`, int64(0), false)
	f.Fuzz(func(t *testing.T, id, name, kind, raw string, n int64, flag bool) {
		item := json.RawMessage(raw)
		ev := &protocol.CallOutput{Type: protocol.EventCallOutput, AgentID: id, TurnID: name, Step: n, CallID: id, Name: name, Namespace: kind,
			Status: kind, Item: item, Activity: name, DurationMS: n}
		if flag {
			ev.Error = &protocol.CallError{Kind: protocol.ErrorKind(kind), Message: name}
			ev.Details = item
			ev.Repairs = []string{id, name}
		}
		checkMarshalEvent(t, ev)
		checkMarshalEvent(t, &protocol.StepDone{Type: protocol.EventStepDone, AgentID: id, TurnID: name, Step: n, Items: []json.RawMessage{item, item}, EndTurn: flag, CompleteActorEvent: !flag})
	})
}

func BenchmarkMarshalEvent(b *testing.B) {
	item := json.RawMessage(`{"type":"function_call_output","call_id":"c0","output":"pong"}`)
	out := &protocol.CallOutput{Type: protocol.EventCallOutput, AgentID: "load", TurnID: "r123456-42", CallID: "c0", Name: "ping",
		Status: protocol.StatusOK, Item: item, Activity: "Pinging", DurationMS: 0}
	done := &protocol.StepDone{Type: protocol.EventStepDone, AgentID: "load", TurnID: "r123456-42", Items: []json.RawMessage{item}}
	for _, bc := range []struct {
		name string
		f    func(any) ([]byte, error)
	}{{"json.Marshal", json.Marshal}, {"marshalEvent", marshalEvent}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = bc.f(out)
				_, _ = bc.f(done)
			}
		})
	}
}
