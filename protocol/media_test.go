package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
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
