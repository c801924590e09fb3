package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/protocol"
)

func mediaItem(callID string, imageBytes int) json.RawMessage {
	b, _ := json.Marshal(protocol.FunctionCallOutput{Type: protocol.ItemFunctionCallOutput, CallID: callID, Content: []protocol.InputContent{
		{Type: protocol.ContentText, Text: "the page"},
		{Type: protocol.ContentImage, ImageURL: "data:image/jpeg;base64," + strings.Repeat("A", imageBytes), Detail: protocol.DetailAuto},
		{Type: protocol.ContentFile, Filename: "a.pdf", FileData: "data:application/pdf;base64," + strings.Repeat("B", 1000)},
	}})
	return b
}

func TestFunctionCallOutputRoundTrip(t *testing.T) {
	raw := mediaItem("c1", 8)
	want := `{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"the page"},` +
		`{"type":"input_image","image_url":"data:image/jpeg;base64,AAAAAAAA","detail":"auto"},` +
		`{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,` + strings.Repeat("B", 1000) + `"}]}`
	if string(raw) != want {
		t.Fatalf("got  %s\nwant %s", raw, want)
	}
	var fo protocol.FunctionCallOutput
	if err := json.Unmarshal(raw, &fo); err != nil {
		t.Fatal(err)
	}
	if fo.Output != "the page" || len(fo.Content) != 3 {
		t.Errorf("decoded %+v", fo)
	}
	again, _ := json.Marshal(fo)
	if string(again) != want {
		t.Errorf("round trip changed the item:\n%s", again)
	}
	// An empty text part keeps its text field: the API requires it.
	b, _ := json.Marshal(protocol.InputContent{Type: protocol.ContentText})
	if string(b) != `{"type":"input_text","text":""}` {
		t.Errorf("empty text part %s", b)
	}
}

// TestCallOutputFitDropsMediaFirst: a call.output over its budget loses
// its largest medium to its note (the builder's, naming the source)
// before any text is clipped.
func TestCallOutputFitDropsMediaFirst(t *testing.T) {
	ev := &protocol.CallOutput{Type: protocol.EventCallOutput, AgentID: "a", TurnID: "t", CallID: "c1", Name: "read_file", Status: "ok",
		Item: mediaItem("c1", 50_000), Details: struct{}{}, MediaNotes: []string{"", "[left out: an image from x.png in your home]", ""}}
	if err := ev.Fit(20_000); err != nil {
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
	ev = &protocol.CallOutput{Type: protocol.EventCallOutput, CallID: "c1", Item: mediaItem("c1", 50_000), Details: struct{}{}}
	if err := ev.Fit(600); err != nil {
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
	ev := &protocol.CallOutput{Type: protocol.EventCallOutput, CallID: "c1", Item: item, Details: struct{}{},
		MediaNotes: []string{"", strings.Repeat("a long note ", 20), ""}}
	if err := ev.Fit(8000); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(ev); len(b) > 8000 {
		t.Errorf("call.output of %d bytes", len(b))
	}
	check("call.output", ev.Item)
	done := &protocol.StepDone{Type: protocol.EventStepDone, Items: []json.RawMessage{item, item}}
	if err := done.Fit(12000); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(done); len(b) > 12000 {
		t.Errorf("step.done of %d bytes", len(b))
	}
	check("step.done 0", done.Items[0])
	check("step.done 1", done.Items[1])
}
