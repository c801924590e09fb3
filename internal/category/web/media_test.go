package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/web"
	"github.com/agentbull/toolruntime/internal/media"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

func gradient(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x), uint8(y), 60, 255})
		}
	}
	return img
}

func noisy(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < len(img.Pix); i += 4 {
		v := r.Uint32()
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = byte(v), byte(v>>8), byte(v>>16), 255
	}
	return img
}

// TestFetchMedia: web_fetch of an image or a PDF, on a real HTTP server,
// returns it as media, by its bytes (a wrong or generic Content-Type does
// not matter); the dispatcher puts it in the item as an input_image or
// input_file, a large image scaled down, a PDF over the budget a note
// naming its URL; a body over the fetch limit is not read.
func TestFetchMedia(t *testing.T) {
	var pngBuf, jpgBuf bytes.Buffer
	if err := png.Encode(&pngBuf, gradient(50, 40)); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&jpgBuf, noisy(1400, 1000), &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	pdf := append([]byte("%PDF-1.5\n"), bytes.Repeat([]byte("stream\n"), 60000)...)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/logo.png":
			ok(w, "image/png", pngBuf.String())
		case "/photo":
			ok(w, "application/octet-stream", jpgBuf.String())
		case "/docs/paper.pdf":
			ok(w, "text/html", string(pdf)) // a lying Content-Type
		case "/docs/small.PDF":
			ok(w, "application/pdf", "%PDF-1.5\nsmall\n")
		case "/claims-png":
			ok(w, "image/png", "<html><body>not an image</body></html>")
		case "/gone.png":
			w.Header().Set("Content-Type", "image/png")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write(pngBuf.Bytes())
		}
	})
	c := newWeb(t, web.Config{Fetch: true, Allow: []string{"127.0.0.1"}, MaxBytes: 2 << 20})

	res, err := fetch(t, c, s.URL+"/logo.png")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Media) != 1 || res.Media[0].MIMEType != media.PNG || !bytes.Equal(res.Media[0].Data, pngBuf.Bytes()) || res.Media[0].Source != s.URL+"/logo.png" {
		t.Errorf("media %+v", res.Media)
	}
	if !strings.HasSuffix(res.Content, "An image (image/png), 50×40 pixels, "+textclip.Size(pngBuf.Len())+".\n") || !strings.HasPrefix(res.Content, "URL: "+s.URL+"/logo.png\n") {
		t.Errorf("content %q", res.Content)
	}
	if d := fetchDetails(t, res); d.Format != "image" || d.Bytes != int64(pngBuf.Len()) {
		t.Errorf("details %+v", d)
	}

	if _, err := fetchCtx(t, context.Background(), c, map[string]any{"url": s.URL + "/logo.png", "offset": 10}); kindOf(err) != tool.InvalidArguments {
		t.Errorf("an image with an offset: %v", err)
	}
	if _, err := fetch(t, c, s.URL+"/claims-png"); err == nil || !strings.Contains(err.Error(), "image/png") {
		t.Errorf("text served as image/png: %v", err)
	}
	if res, err := fetch(t, c, s.URL+"/gone.png"); kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "404") || len(res.Media) != 1 {
		t.Errorf("an image with a 404: %v, %d media", err, len(res.Media))
	}
	small := newWeb(t, web.Config{Fetch: true, Allow: []string{"127.0.0.1"}, MaxBytes: 1 << 10})
	if _, err := fetch(t, small, s.URL+"/photo"); err == nil || !strings.Contains(err.Error(), "larger than the 1.0 KiB web_fetch reads") {
		t.Errorf("an image over the fetch limit: %v", err)
	}

	// Through the dispatcher, as the worker runs it.
	fetchTool := webTool(t, c, web.FetchName)
	set, err := turn.NewSet(fetchTool)
	if err != nil {
		t.Fatal(err)
	}
	d := &turn.Dispatcher{MediaBudget: 200 << 10}
	r := d.Run(context.Background(), set, turn.Input{AgentID: "a1", TurnID: "t1", Calls: []protocol.CallItem{
		{Type: protocol.ItemFunctionCall, CallID: "c1", Name: web.FetchName, Arguments: `{"url":"` + s.URL + `/photo"}`},
		{Type: protocol.ItemFunctionCall, CallID: "c2", Name: web.FetchName, Arguments: `{"url":"` + s.URL + `/docs/paper.pdf"}`},
		{Type: protocol.ItemFunctionCall, CallID: "c3", Name: web.FetchName, Arguments: `{"url":"` + s.URL + `/logo.png"}`},
		{Type: protocol.ItemFunctionCall, CallID: "c4", Name: web.FetchName, Arguments: `{"url":"` + s.URL + `/docs/small.PDF"}`},
	}})
	var photo, paper, logo, smallPDF protocol.FunctionCallOutput
	for i, fo := range []*protocol.FunctionCallOutput{&photo, &paper, &logo, &smallPDF} {
		if err := json.Unmarshal(r.Outcomes[i].Item, fo); err != nil {
			t.Fatal(err)
		}
	}
	if jpgBuf.Len() < 400<<10 {
		t.Fatalf("the photo is only %d bytes: the test does not test", jpgBuf.Len())
	}
	if len(photo.Content) != 2 || photo.Content[1].Type != protocol.ContentImage || len(photo.Content[1].ImageURL) > 200<<10 {
		t.Errorf("photo: %.300v", photo.Content)
	}
	if paper.Content != nil || !strings.Contains(paper.Output, "[left out: the PDF file paper.pdf (410 KiB) from "+s.URL+"/docs/paper.pdf, because it does not fit the 200 KiB of media one output may hold]") {
		t.Errorf("paper: %q", paper.Output)
	}
	if len(logo.Content) != 2 || logo.Content[1].ImageURL != media.DataURL(media.PNG, pngBuf.Bytes()) {
		t.Errorf("logo: %.300v", logo.Content)
	}
	if want := (protocol.InputContent{Type: protocol.ContentFile, Filename: "small.PDF", FileData: media.DataURL(media.PDF, []byte("%PDF-1.5\nsmall\n"))}); len(smallPDF.Content) != 2 || smallPDF.Content[1] != want {
		t.Errorf("small PDF: %+v", smallPDF.Content)
	}
}
