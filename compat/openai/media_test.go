package openai_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// The media the MCP server, the agent's home and the web site hand the
// worker: each a valid file of its format, made by the standard library
// (a hand-typed PNG with a wrong checksum is refused, rightly, as one that
// does not decode).
var (
	drawPNG   = encodePNG(gradient(8, 6, true))
	sketchPDF = pdf(0)
	sketchURI = "file:///drawings/sketch.pdf"
	chirpWAV  = wav(400)
	// bigPDF is over the default media budget (256 KiB of base64).
	bigPDF  = pdf(300 << 10)
	scanURI = "file:///scans/scan.pdf"
)

// wirePart is a part of a function_call_output array, every field a part
// of the protocol may have.
type wirePart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data,omitempty"`
}

// wantPart is what one part must be.
type wantPart struct {
	typ  string
	text string // input_text: a substring of its text
	mime string // input_image, input_file: the data URL's media type
	data []byte // and its bytes; nil for an image the worker re-encoded
	name string // input_file: its filename
	// scaledFrom is, for an image scaled down, the original's size.
	scaledFrom image.Point
}

func text(s string) wantPart { return wantPart{typ: "input_text", text: s} }
func img(mime string, data []byte) wantPart {
	return wantPart{typ: "input_image", mime: mime, data: data}
}
func file(name string, data []byte) wantPart {
	return wantPart{typ: "input_file", mime: "application/pdf", data: data, name: name}
}

// TestMediaItemsRoundTrip gets media outputs from the real worker: MCP
// image, audio and PDF blob content, read_file of a PNG, a JPEG and a PDF
// in the agent's home, an image over the media budget (scaled down), a
// PDF over it (a note, alone and beside an image), web_fetch of an
// image, and a step of more scaled images than its step.done holds (some
// replaced by notes there). Every call.output item and step.done item is read by
// responses.ResponseInputItemUnionParam, a function_call_output's array
// as the SDK's input content union: each part the variant its type
// names, with the worker's text, data URL, detail and filename, and
// marshalled back to equal JSON. Passed with param.Override they reach the
// request body byte for byte.
func TestMediaItemsRoundTrip(t *testing.T) {
	chart := encodePNG(gradient(64, 48, true))
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/chart.png" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(chart)
	}))
	t.Cleanup(site.Close)
	// The site is on loopback, which web_fetch's guard refuses unless
	// allowed.
	f := startFleet(t, "--web-allow", "127.0.0.1")

	home := filepath.Join(f.homes, "a1")
	pic := encodePNG(gradient(48, 32, true))
	photo := encodeJPEG(gradient(40, 30, false))
	report := pdf(2 << 10)
	big := encodePNG(noise(360, 240))  // about 340 KiB, over the budget: scaled down
	near := encodePNG(noise(220, 200)) // about 172 KiB, within the budget
	if len(big)*4/3 <= 256<<10 || len(near)*4/3 > 250<<10 {
		t.Fatalf("big.png is %d bytes, near.png %d: not over and within the media budget", len(big), len(near))
	}
	for name, b := range map[string][]byte{
		"pics/pic.png": pic, "pics/photo.jpg": photo, "pics/big.png": big, "pics/near.png": near,
		"docs/report <final> & co.pdf": report, "docs/big.pdf": bigPDF,
	} {
		must(t, os.MkdirAll(filepath.Join(home, filepath.Dir(name)), 0o700))
		must(t, os.WriteFile(filepath.Join(home, name), b, 0o600))
	}

	ctx := allContext()
	ns := mcpServer
	_, done := f.publish(t, "a1", "media", 0, ctx, searchCall("search", "draw scan")).wait(t)
	if len(done.Items) != 1 {
		t.Fatalf("tool search step: %d items", len(done.Items))
	}
	if loaded := loadedTools(t, done.Items[0]); !loaded[ns+".draw"] || !loaded[ns+".scan"] {
		t.Fatalf("tool search did not load %s.draw and %s.scan: %s", ns, ns, done.Items[0])
	}

	fetchURL := site.URL + "/chart.png"
	readFile := func(p string) string { b, _ := json.Marshal(map[string]string{"path": p}); return string(b) }
	expect := map[string][]wantPart{
		"draw": {text("a picture:"), img("image/png", drawPNG), file("sketch.pdf", sketchPDF),
			text("[left out: audio/wav content")},
		"scan": {img("image/png", drawPNG), text("[left out: the PDF file scan.pdf")},
		"png":  {text("pics/pic.png: an image (image/png), 48×32 pixels"), img("image/png", pic)},
		"jpeg": {text("pics/photo.jpg: an image (image/jpeg), 40×30 pixels"), img("image/jpeg", photo)},
		"pdf":  {text("docs/report <final> & co.pdf: a PDF file"), file("report <final> & co.pdf", report)},
		"scaled": {text("pics/big.png: an image (image/png), 360×240 pixels"),
			{typ: "input_image", mime: "image/png", scaledFrom: image.Pt(360, 240)}},
		"fetched": {text("URL: " + fetchURL), img("image/png", chart)},
	}
	// The PDF over the budget is read_file's only medium: its note leaves
	// the output a string.
	wantString := map[string]string{"over": "[left out: the PDF file big.pdf"}
	outs, done := f.publish(t, "a1", "media", 1, ctx,
		nsCall("draw", ns, "draw", `{}`),
		nsCall("scan", ns, "scan", `{}`),
		call("png", "read_file", readFile("pics/pic.png")),
		call("jpeg", "read_file", readFile("pics/photo.jpg")),
		call("pdf", "read_file", readFile("docs/report <final> & co.pdf")),
		call("scaled", "read_file", readFile("pics/big.png")),
		call("over", "read_file", readFile("docs/big.pdf")),
		call("fetched", "web_fetch", `{"url":"`+fetchURL+`"}`),
	).wait(t)

	if len(outs) != len(expect)+len(wantString) || len(done.Items) != len(outs) {
		t.Fatalf("%d call.output events and %d step.done items for %d calls", len(outs), len(done.Items), len(expect)+len(wantString))
	}
	byCall := map[string]json.RawMessage{}
	for _, it := range done.Items {
		var h struct {
			CallID string `json:"call_id"`
		}
		must(t, json.Unmarshal(it, &h))
		byCall[h.CallID] = it
		checkItem(t, "step.done item "+h.CallID, it)
	}
	var items []json.RawMessage
	for id, o := range outs {
		if o.Status != "ok" {
			t.Errorf("call %s: %s", id, o.Raw)
			continue
		}
		what := "call.output of " + id
		checkItem(t, what, o.Item)
		// Under the step's size limit nothing is refitted: step.done
		// carries the call.output item as it was.
		if !bytes.Equal(byCall[id], o.Item) {
			t.Errorf("call %s: step.done item differs from its call.output item:\n %.300s\n %.300s", id, byCall[id], o.Item)
		}
		items = append(items, o.Item, byCall[id])
		if s, ok := wantString[id]; ok {
			var u responses.ResponseInputItemUnionParam
			must(t, json.Unmarshal(o.Item, &u))
			if out := u.OfFunctionCallOutput.Output.OfString; !out.Valid() || !strings.Contains(out.Value, s) {
				t.Errorf("%s: output read as %+v, want a string with %q", what, u.OfFunctionCallOutput.Output, s)
			}
			continue
		}
		checkParts(t, what, sdkParts(t, what, o.Item), expect[id])
	}

	// Six images that each fit an output are more than one step.done
	// holds: the worker replaces some by notes there, largest first, and
	// those items too must be the SDK's.
	var calls []any
	for i := range 6 {
		calls = append(calls, call("near"+strconv.Itoa(i), "read_file", readFile("pics/near.png")))
	}
	outs, done = f.publish(t, "a1", "media", 2, ctx, calls...).wait(t)
	if len(outs) != len(calls) || len(done.Items) != len(calls) {
		t.Fatalf("%d call.output events and %d step.done items for %d calls", len(outs), len(done.Items), len(calls))
	}
	refitted := 0
	for _, it := range done.Items {
		var h struct {
			CallID string `json:"call_id"`
		}
		must(t, json.Unmarshal(it, &h))
		o := outs[h.CallID]
		checkItem(t, "call.output of "+h.CallID, o.Item)
		checkItem(t, "step.done item "+h.CallID, it)
		sdkParts(t, "call.output of "+h.CallID, o.Item)
		if !bytes.Equal(it, o.Item) {
			refitted++
			if !strings.Contains(string(it), "over the size limit of one event") {
				t.Errorf("step.done item %s differs from its call.output without the note: %.400s", h.CallID, it)
			}
		}
		items = append(items, o.Item, it)
	}
	if refitted == 0 {
		t.Errorf("step.done of six images (%d bytes) kept them all", len(done.Raw))
	}
	t.Logf("step.done of six images: %d of them replaced by notes, %d bytes", refitted, len(done.Raw))

	input := make(responses.ResponseInputParam, len(items))
	typed := make(responses.ResponseInputParam, len(items))
	for i, it := range items {
		input[i] = param.Override[responses.ResponseInputItemUnionParam](it)
		must(t, json.Unmarshal(it, &typed[i]))
	}
	body := captureRequest(t, responses.ResponseNewParams{Model: "gpt-5",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	var sent []json.RawMessage
	must(t, json.Unmarshal(bodyField(t, body, "input"), &sent))
	if len(sent) != len(items) {
		t.Fatalf("the request has %d input items, want %d", len(sent), len(items))
	}
	for i := range items {
		if !bytes.Equal(sent[i], items[i]) {
			t.Errorf("input item %d is not the worker's bytes:\n sent %.300s\n want %.300s", i, sent[i], items[i])
		}
	}

	// Without Override the SDK writes its own types: logged, for the
	// reason Override is needed (checkItem holds their values equal).
	body = captureRequest(t, responses.ResponseNewParams{Model: "gpt-5",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: typed}})
	must(t, json.Unmarshal(bodyField(t, body, "input"), &sent))
	changed, size := 0, 0
	for i := range items {
		size += len(items[i])
		if !bytes.Equal(sent[i], items[i]) {
			if changed == 0 {
				t.Logf("as the SDK writes item %d:\n %.400s\nthe worker's:\n %.400s", i, sent[i], items[i])
			}
			changed++
		}
	}
	t.Logf("%d media items (%d KiB) round-tripped; %d change bytes (not value) when the SDK re-marshals its own types",
		len(items), size>>10, changed)
}

// sdkParts reads a function_call_output item with an array output as the
// SDK does and returns its parts as the SDK read them, after checking each
// is the variant its type names with the worker's fields, and nothing
// else set.
func sdkParts(t *testing.T, what string, raw json.RawMessage) []wirePart {
	t.Helper()
	var head struct {
		Output []wirePart `json:"output"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		t.Errorf("%s: output is not an array of parts: %v: %.300s", what, err, raw)
		return nil
	}
	var u responses.ResponseInputItemUnionParam
	must(t, json.Unmarshal(raw, &u))
	if u.OfFunctionCallOutput == nil {
		t.Errorf("%s: not read as a function_call_output", what)
		return nil
	}
	parts := u.OfFunctionCallOutput.Output.OfResponseFunctionCallOutputItemArray
	if len(parts) != len(head.Output) {
		t.Errorf("%s: %d parts read, the item has %d", what, len(parts), len(head.Output))
		return nil
	}
	read := make([]wirePart, len(parts))
	for i, p := range parts {
		var r wirePart
		switch {
		case p.OfInputText != nil:
			r = wirePart{Type: "input_text", Text: p.OfInputText.Text}
		case p.OfInputImage != nil:
			im := p.OfInputImage
			r = wirePart{Type: "input_image", ImageURL: im.ImageURL.Value, Detail: string(im.Detail)}
			if !im.ImageURL.Valid() || im.FileID.Valid() {
				t.Errorf("%s part %d: image read with image_url %v, file_id %v", what, i, im.ImageURL.Valid(), im.FileID.Valid())
			}
		case p.OfInputFile != nil:
			fl := p.OfInputFile
			r = wirePart{Type: "input_file", Filename: fl.Filename.Value, FileData: fl.FileData.Value}
			if !fl.Filename.Valid() || !fl.FileData.Valid() || fl.FileID.Valid() || fl.FileURL.Valid() || fl.Detail != "" {
				t.Errorf("%s part %d: file read as %+v", what, i, fl)
			}
		default:
			t.Errorf("%s part %d (%s): read as no variant", what, i, head.Output[i].Type)
		}
		if r != head.Output[i] {
			t.Errorf("%s part %d: the SDK read\n %.200v\nfrom\n %.200v", what, i, r, head.Output[i])
		}
		read[i] = r
	}
	return read
}

// checkParts holds the parts the SDK read to what the worker was given:
// the kinds in order, the texts, and the media's bytes (an image that was
// scaled down: smaller, with its aspect ratio).
func checkParts(t *testing.T, what string, got []wirePart, want []wantPart) {
	t.Helper()
	if len(got) != len(want) {
		kinds := make([]string, len(got))
		for i, p := range got {
			kinds[i] = p.Type
		}
		t.Errorf("%s: parts %v, want %d", what, kinds, len(want))
		return
	}
	for i, w := range want {
		g := got[i]
		if g.Type != w.typ {
			t.Errorf("%s part %d: %s, want %s", what, i, g.Type, w.typ)
			continue
		}
		var url string
		switch w.typ {
		case "input_text":
			if !strings.Contains(g.Text, w.text) {
				t.Errorf("%s part %d: text %q, want it to hold %q", what, i, g.Text, w.text)
			}
			continue
		case "input_image":
			url = g.ImageURL
			if g.Detail != "auto" {
				t.Errorf("%s part %d: detail %q", what, i, g.Detail)
			}
		case "input_file":
			url = g.FileData
			if g.Filename != w.name {
				t.Errorf("%s part %d: filename %q, want %q", what, i, g.Filename, w.name)
			}
		}
		mime, data, ok := parseDataURL(url)
		if !ok || mime != w.mime {
			t.Errorf("%s part %d: %.60s is not a base64 data URL of %s", what, i, url, w.mime)
			continue
		}
		if w.data != nil && !bytes.Equal(data, w.data) {
			t.Errorf("%s part %d: %d bytes, not the %d given", what, i, len(data), len(w.data))
		}
		if from := w.scaledFrom; from != (image.Point{}) {
			cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
			switch {
			case err != nil:
				t.Errorf("%s part %d: the scaled image does not decode: %v", what, i, err)
			case cfg.Width >= from.X || cfg.Width*from.Y/from.X-cfg.Height > 1 || cfg.Height-cfg.Width*from.Y/from.X > 1:
				t.Errorf("%s part %d: scaled to %d×%d from %v", what, i, cfg.Width, cfg.Height, from)
			case len(url) > 256<<10:
				t.Errorf("%s part %d: the scaled image's data URL is %d bytes, over the budget", what, i, len(url))
			}
		}
	}
}

func parseDataURL(s string) (mime string, data []byte, ok bool) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return "", nil, false
	}
	mime, b64, ok := strings.Cut(rest, ";base64,")
	if !ok {
		return "", nil, false
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	return mime, data, err == nil
}

// loadedTools lists the tools a tool_search_output loads, by name
// ("namespace.name" inside a namespace).
func loadedTools(t *testing.T, item json.RawMessage) map[string]bool {
	t.Helper()
	var so struct {
		Type  string     `json:"type"`
		Tools []toolHead `json:"tools"`
	}
	must(t, json.Unmarshal(item, &so))
	if so.Type != "tool_search_output" {
		t.Fatalf("not a tool_search_output: %.300s", item)
	}
	loaded := map[string]bool{}
	for _, tl := range so.Tools {
		loaded[tl.Name] = true
		for _, inner := range tl.Tools {
			var ih toolHead
			must(t, json.Unmarshal(inner, &ih))
			loaded[tl.Name+"."+ih.Name] = true
		}
	}
	return loaded
}

// gradient is a w×h picture, with an alpha ramp when alpha is set.
func gradient(w, h int, alpha bool) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			a := uint8(255)
			if alpha {
				a = uint8(64 + 191*x/w)
			}
			m.SetNRGBA(x, y, color.NRGBA{uint8(255 * x / w), uint8(255 * y / h), 128, a})
		}
	}
	return m
}

// noise is a w×h picture of random pixels and transparency: it does not
// compress, so its PNG is about 4 bytes a pixel, as is the PNG the worker
// scales it to (a JPEG would not keep the transparency).
func noise(w, h int) *image.NRGBA {
	r := rand.New(rand.NewPCG(1, 2))
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(m.Pix); i += 4 {
		m.Pix[i], m.Pix[i+1], m.Pix[i+2], m.Pix[i+3] = uint8(r.Uint32()), uint8(r.Uint32()), uint8(r.Uint32()), uint8(r.Uint32())
	}
	return m
}

func encodePNG(m image.Image) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func encodeJPEG(m image.Image) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 90}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// pdf is a one-page PDF, padded with comment lines to at least pad bytes.
func pdf(pad int) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n1 0 obj <</Type /Catalog /Pages 2 0 R>> endobj\n" +
		"2 0 obj <</Type /Pages /Kids [3 0 R] /Count 1>> endobj\n" +
		"3 0 obj <</Type /Page /Parent 2 0 R /MediaBox [0 0 200 100]>> endobj\n")
	for b.Len() < pad {
		b.WriteString("% padding to make the file large enough for the test\n")
	}
	b.WriteString("trailer <</Root 1 0 R>>\n%%EOF\n")
	return b.Bytes()
}

// wav is a mono 8 kHz 16-bit WAV file of n samples of a square wave.
func wav(n int) []byte {
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + 2*n))
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(1))     // PCM
	le(uint16(1))     // mono
	le(uint32(8000))  // sample rate
	le(uint32(16000)) // byte rate
	le(uint16(2))     // block align
	le(uint16(16))    // bits per sample
	b.WriteString("data")
	le(uint32(2 * n))
	for i := range n {
		v := int16(8000)
		if i/10%2 == 1 {
			v = -v
		}
		le(v)
	}
	return b.Bytes()
}
