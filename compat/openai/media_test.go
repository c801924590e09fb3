package openai_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// TestMediaOutputShape checks the array form of function_call_output
// (PROTOCOL.md 1.1, "Media outputs"): input_text, input_image and
// input_file parts round-trip through the SDK and pass through
// param.Override byte for byte.
//
// The items are built here to the protocol's exact shape, with the
// worker's JSON encoding (encoding/json: compact, HTML characters
// escaped), because the worker of this commit answers every call with a
// string (gotest.draw's image is a text note). When media outputs land,
// TestOutputItemsRoundTrip checks gotest.draw's real array output as it
// does every item; then switch this test to the worker's own items too:
// the step.done items of gotest.draw (an MCP image) and of read_file of a
// PNG and a PDF in the agent's home, instead of media().
func TestMediaOutputShape(t *testing.T) {
	for name, item := range media(t) {
		if typ := checkItem(t, name, item); typ != "function_call_output" {
			t.Fatalf("%s: type %s", name, typ)
		}
		var u responses.ResponseInputItemUnionParam
		must(t, json.Unmarshal(item, &u))
		parts := u.OfFunctionCallOutput.Output.OfResponseFunctionCallOutputItemArray
		var kinds []string
		for _, p := range parts {
			switch {
			case p.OfInputText != nil:
				kinds = append(kinds, "input_text")
			case p.OfInputImage != nil:
				kinds = append(kinds, "input_image")
				if p.OfInputImage.Detail != "auto" || !p.OfInputImage.ImageURL.Valid() {
					t.Errorf("%s: image part read as %+v", name, p.OfInputImage)
				}
			case p.OfInputFile != nil:
				kinds = append(kinds, "input_file")
				if !p.OfInputFile.Filename.Valid() || !p.OfInputFile.FileData.Valid() {
					t.Errorf("%s: file part read as %+v", name, p.OfInputFile)
				}
			}
		}
		var want []struct {
			Type string `json:"type"`
		}
		var head struct {
			Output json.RawMessage `json:"output"`
		}
		must(t, json.Unmarshal(item, &head))
		must(t, json.Unmarshal(head.Output, &want))
		if len(kinds) != len(want) {
			t.Fatalf("%s: %d parts read, want %d", name, len(kinds), len(want))
		}
		for i := range want {
			if kinds[i] != want[i].Type {
				t.Errorf("%s part %d: read as %s, want %s", name, i, kinds[i], want[i].Type)
			}
		}

		body := captureRequest(t, responses.ResponseNewParams{Model: "gpt-5",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				param.Override[responses.ResponseInputItemUnionParam](item)}}})
		var sent []json.RawMessage
		must(t, json.Unmarshal(bodyField(t, body, "input"), &sent))
		if len(sent) != 1 || !bytes.Equal(sent[0], item) {
			t.Errorf("%s: the request's input is not the item's bytes:\n sent %.300s\n want %.300s", name, sent, item)
		}
	}
}

// media builds function_call_output items with array outputs as
// PROTOCOL.md 1.1 shows them.
func media(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	text := func(s string) map[string]any { return map[string]any{"type": "input_text", "text": s} }
	image := map[string]any{"type": "input_image", "image_url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(tinyPNG), "detail": "auto"}
	file := map[string]any{"type": "input_file", "filename": "report <final>.pdf", "file_data": "data:application/pdf;base64," + base64.StdEncoding.EncodeToString([]byte("%PDF-1.4\n%%EOF\n"))}
	build := func(callID string, parts ...any) json.RawMessage {
		// Field order as the worker writes an item: type, call_id, output.
		b, err := json.Marshal(struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
			Output []any  `json:"output"`
		}{"function_call_output", callID, parts})
		must(t, err)
		return b
	}
	return map[string]json.RawMessage{
		"mcp image":           build("c_img", text("a picture:"), image),
		"pdf file":            build("c_pdf", file),
		"text, image, file":   build("c_all", text("Here & there: <see>"), image, file, text("the end")),
		"image left out note": build("c_big", image, text("[an image of 40 MB was left out: it is in .outputs/big.png]")),
	}
}
