package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

// checkMarshalEvent fails t unless Marshal(v) writes what json.Marshal(v)
// writes, or fails as it does.
func checkMarshalEvent(t *testing.T, v any) {
	t.Helper()
	want, werr := json.Marshal(v)
	got, gerr := Marshal(v)
	if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("Marshal(%+v) = %s, %v; json.Marshal = %s, %v", v, got, gerr, want, werr)
	}
	// Into a buffer that holds something already (a pooled one is reused
	// from its start): the event goes after it.
	buf := make([]byte, 3, 8)
	copy(buf, "pre")
	got, gerr = Append(buf, v)
	if (werr == nil) != (gerr == nil) || werr == nil && string(got) != "pre"+string(want) {
		t.Fatalf("Append(pre, %+v) = %s, %v; json.Marshal = %s, %v", v, got, gerr, want, werr)
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
	}{{"json.Marshal", json.Marshal}, {"Marshal", Marshal}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = bc.f(out)
				_, _ = bc.f(done)
			}
		})
	}
}

// Activity events too: written by hand, and within a budget.
func TestActivityEncodeIsMarshal(t *testing.T) {
	hostile := []string{"", "c1", "a\"b", "<&>", "\x00", "\u2028", "\xff", "é"}
	for _, s := range hostile {
		for _, a := range []protocol.Activity{
			{CallID: s, Name: s, State: "started", Label: s},
			{CallID: "c", State: "progress", Label: s, Progress: &protocol.Progress{}},
		} {
			checkMarshalEvent(t, a)
			want, _ := json.Marshal(a)
			if got, err := AppendActivity([]byte("pre"), a, 1<<20); err != nil || string(got) != "pre"+string(want) {
				t.Fatalf("AppendActivity(pre, %+v) = %s, %v; json.Marshal = %s", a, got, err, want)
			}
		}
	}
}

// An activity over its budget has its texts clipped, and one that does
// not fit even so is refused.
func TestActivityWithinBudget(t *testing.T) {
	big := strings.Repeat("<label>", 2000)
	a := protocol.Activity{CallID: "c1", Name: "ping", State: "started", Label: big}
	got, err := AppendActivity([]byte("pre"), a, 4096)
	if err != nil || len(got)-3 > 4096 || !strings.HasPrefix(string(got), "pre") {
		t.Fatalf("AppendActivity = %d bytes, %v", len(got), err)
	}
	var back protocol.Activity
	if err := json.Unmarshal(got[3:], &back); err != nil || !strings.Contains(back.Label, "bytes left out") || back.CallID != "c1" {
		t.Fatalf("clipped activity %s (%v)", got[3:], err)
	}
	if _, err := AppendActivity(nil, a, 10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("an activity over a budget of 10 bytes: %v", err)
	}
}

func FuzzActivityEncode(f *testing.F) {
	f.Add("done", "w1", "c1", `{"output":"x"}`)
	f.Add("", "<&>", "", `null`)
	f.Fuzz(func(t *testing.T, state, name, callID, label string) {
		a := protocol.Activity{CallID: callID, Name: name, State: state, Label: label}
		want, _ := json.Marshal(a)
		if got, _ := Marshal(a); !bytes.Equal(got, want) {
			t.Fatalf("Marshal(activity) = %s; json.Marshal = %s", got, want)
		}
	})
}
