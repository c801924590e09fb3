package wire_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/wire"
	"github.com/agentbull/toolruntime/protocol"
)

func TestCallOutputFit(t *testing.T) {
	text := "HEAD" + strings.Repeat("y", 3<<20) + "TAIL"
	ev := &protocol.CallOutput{
		Type: protocol.EventCallOutput, AgentID: "a", TurnID: "t", CallID: "c1", Name: "n",
		Status: protocol.StatusError, Error: &protocol.CallError{Kind: protocol.ToolError, Message: text},
		Item:    mustItem("c1", "Error (tool_error): "+text),
		Details: js(map[string]string{"big": text}),
		Events:  []protocol.PresentationEvent{{Type: "e", Data: js(text)}, {Type: "e", Data: js(text)}},
		Repairs: make([]string, 500),
	}
	const budget = 1 << 20
	if err := wire.FitCallOutput(ev, budget); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(ev)
	if len(data) > budget {
		t.Fatalf("%d bytes after Fit(%d)", len(data), budget)
	}
	var item protocol.FunctionCallOutput
	if err := json.Unmarshal(ev.Item, &item); err != nil || !strings.HasSuffix(item.Output, "TAIL") || !strings.Contains(item.Output, "bytes left out") {
		t.Errorf("item %.200s (%v)", ev.Item, err)
	}
	var d wire.DroppedDetails
	if err := json.Unmarshal(ev.Details, &d); err != nil || !d.Dropped || d.Bytes < 3<<20 {
		t.Errorf("details %s (%v)", ev.Details, err)
	}
	if last := ev.Events[len(ev.Events)-1]; last.Type != "clipped" {
		t.Errorf("events end with %v", last)
	}
	if ev.Repairs[len(ev.Repairs)-1] != "and 480 more" {
		t.Errorf("repairs end with %q", ev.Repairs[len(ev.Repairs)-1])
	}
}

func TestStepDoneFitSharesFairly(t *testing.T) {
	var items []json.RawMessage
	for i := range 30 {
		items = append(items, mustItem(fmt.Sprint("small", i), "ok"))
	}
	for i := range 5 {
		items = append(items, mustItem(fmt.Sprint("large", i), strings.Repeat("z", 100<<10)))
	}
	ev := &protocol.StepDone{Type: protocol.EventStepDone, AgentID: "a", TurnID: "t", Items: items}
	const budget = 200 << 10
	if err := wire.FitStepDone(ev, budget); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(ev)
	if len(data) > budget || len(ev.Items) != 35 {
		t.Fatalf("%d bytes, %d items", len(data), len(ev.Items))
	}
	for i, it := range ev.Items {
		var fo protocol.FunctionCallOutput
		_ = json.Unmarshal(it, &fo)
		switch {
		case i < 30 && fo.Output != "ok":
			t.Errorf("small item %d changed: %q", i, fo.Output)
		case i >= 30 && (!strings.Contains(fo.Output, "bytes left out") || len(it) < 30<<10):
			t.Errorf("large item %d: %d bytes", i, len(it))
		}
	}
	// Too many items for any step.done.
	many := &protocol.StepDone{Type: protocol.EventStepDone, Items: items}
	if err := wire.FitStepDone(many, 1000); err == nil {
		t.Error("35 items fit 1000 bytes")
	}
}

func mustItem(callID, text string) json.RawMessage {
	b, _ := json.Marshal(protocol.FunctionCallOutput{Type: protocol.ItemFunctionCallOutput, CallID: callID, Output: text})
	return b
}

func FuzzStepDoneFit(f *testing.F) {
	f.Add([]byte(`{"type":"function_call_output","call_id":"c","output":"x"}`), 3, 200)
	f.Add([]byte(`{"type":"tool_search_output","call_id":"c","tools":[]}`), 10, 300)
	f.Fuzz(func(t *testing.T, item []byte, copies, budget int) {
		if !json.Valid(item) || copies < 0 || copies > 50 || budget < 0 || budget > 1<<20 {
			return
		}
		ev := &protocol.StepDone{Type: protocol.EventStepDone}
		for range copies {
			ev.Items = append(ev.Items, json.RawMessage(item))
		}
		if err := wire.FitStepDone(ev, budget); err != nil {
			return
		}
		data, err := json.Marshal(ev)
		if err != nil || len(data) > budget && len(ev.Items) > 0 {
			t.Fatalf("Fit(%d) left %d bytes (%v)", budget, len(data), err)
		}
		if len(ev.Items) != copies {
			t.Fatalf("%d items, want %d", len(ev.Items), copies)
		}
	})
}

func FuzzCallOutputFit(f *testing.F) {
	f.Add("output text", "message", "details", 400)
	f.Add(strings.Repeat("<>&\n", 500), strings.Repeat("m", 3000), strings.Repeat("d", 5000), 2000)
	f.Fuzz(func(t *testing.T, text, message, details string, budget int) {
		if budget < 0 || budget > 1<<20 {
			return
		}
		ev := &protocol.CallOutput{
			Type: protocol.EventCallOutput, AgentID: "a", TurnID: "t", CallID: "c", Name: "n",
			Status: protocol.StatusError, Error: &protocol.CallError{Kind: protocol.ToolError, Message: message},
			Item: mustItem("c", text), Details: js(details), Events: []protocol.PresentationEvent{{Type: "e", Data: js(details)}}, Repairs: []string{details},
		}
		if err := wire.FitCallOutput(ev, budget); err != nil {
			return
		}
		data, err := json.Marshal(ev)
		if err != nil || len(data) > budget {
			t.Fatalf("Fit(%d) left %d bytes (%v)", budget, len(data), err)
		}
		var item protocol.FunctionCallOutput
		if err := json.Unmarshal(ev.Item, &item); err != nil || item.CallID != "c" {
			t.Fatalf("item %s (%v)", ev.Item, err)
		}
	})
}

func mediaItem(callID string, imageBytes int) json.RawMessage {
	b, _ := json.Marshal(protocol.FunctionCallOutput{Type: protocol.ItemFunctionCallOutput, CallID: callID, Content: []protocol.InputContent{
		{Type: protocol.ContentText, Text: "the page"},
		{Type: protocol.ContentImage, ImageURL: "data:image/jpeg;base64," + strings.Repeat("A", imageBytes), Detail: protocol.DetailAuto},
		{Type: protocol.ContentFile, Filename: "a.pdf", FileData: "data:application/pdf;base64," + strings.Repeat("B", 1000)},
	}})
	return b
}

// TestCallOutputFitDropsMediaFirst: a call.output over its budget loses
// its largest medium to its note (the builder's, naming the source)
// before any text is clipped.
func TestCallOutputFitDropsMediaFirst(t *testing.T) {
	ev := &protocol.CallOutput{Type: protocol.EventCallOutput, AgentID: "a", TurnID: "t", CallID: "c1", Name: "read_file", Status: "ok",
		Item: mediaItem("c1", 50_000), Details: js(struct{}{}), MediaNotes: []string{"", "[left out: an image from x.png in your home]", ""}}
	if err := wire.FitCallOutput(ev, 20_000); err != nil {
		t.Fatal(err)
	}
	var fo protocol.FunctionCallOutput
	if err := json.Unmarshal(ev.Item, &fo); err != nil {
		t.Fatal(err)
	}
	if len(fo.Content) != 3 || fo.Content[1].Text != "[left out: an image from x.png in your home]" || fo.Content[2].Type != protocol.ContentFile || fo.Content[0].Text != "the page" {
		t.Errorf("item %s", ev.Item)
	}
	// Without notes, and with a budget that holds no media: a made-up
	// note, and a string output once no media are left.
	ev = &protocol.CallOutput{Type: protocol.EventCallOutput, CallID: "c1", Item: mediaItem("c1", 50_000), Details: js(struct{}{})}
	if err := wire.FitCallOutput(ev, 600); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ev.Item, &fo); err != nil {
		t.Fatal(err)
	}
	if fo.Content != nil || !strings.HasPrefix(fo.Output, "the page\n[left out: an image/jpeg image (37 KiB), because the step's outputs were over") ||
		!strings.Contains(fo.Output, "[left out: the PDF file a.pdf (750 bytes)") {
		t.Errorf("item %s", ev.Item)
	}
	if b, _ := json.Marshal(ev); len(b) > 600 {
		t.Errorf("call.output of %d bytes", len(b))
	}
}

// TestFitClipsTextBesideMedia: media smaller than their notes stay when
// an output must shrink; the longest text part is clipped instead, in
// call.output and in step.done.
func TestFitClipsTextBesideMedia(t *testing.T) {
	item, _ := json.Marshal(protocol.FunctionCallOutput{Type: protocol.ItemFunctionCallOutput, CallID: "c1", Content: []protocol.InputContent{
		{Type: protocol.ContentText, Text: strings.Repeat("long text ", 3000)},
		{Type: protocol.ContentImage, ImageURL: "data:image/png;base64,AAAA", Detail: protocol.DetailAuto},
		{Type: protocol.ContentText, Text: "[left out: something]"},
	}})
	check := func(where string, raw json.RawMessage) {
		t.Helper()
		var fo protocol.FunctionCallOutput
		if err := json.Unmarshal(raw, &fo); err != nil {
			t.Fatal(err)
		}
		if len(fo.Content) != 3 || fo.Content[1].ImageURL != "data:image/png;base64,AAAA" || fo.Content[2].Text != "[left out: something]" ||
			!strings.Contains(fo.Content[0].Text, "bytes left out …]") {
			t.Errorf("%s: %.300s", where, raw)
		}
	}
	ev := &protocol.CallOutput{Type: protocol.EventCallOutput, CallID: "c1", Item: item, Details: js(struct{}{}),
		MediaNotes: []string{"", strings.Repeat("a long note ", 20), ""}}
	if err := wire.FitCallOutput(ev, 8000); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(ev); len(b) > 8000 {
		t.Errorf("call.output of %d bytes", len(b))
	}
	check("call.output", ev.Item)
	done := &protocol.StepDone{Type: protocol.EventStepDone, Items: []json.RawMessage{item, item}}
	if err := wire.FitStepDone(done, 12000); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(done); len(b) > 12000 {
		t.Errorf("step.done of %d bytes", len(b))
	}
	check("step.done 0", done.Items[0])
	check("step.done 1", done.Items[1])
}

// js is v encoded, as the worker puts a tool's details into an event.
func js(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
