package turn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"strings"
	"testing"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/wire"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// tinyPNG is a deterministic w×h PNG: a gradient, or noise (which does
// not compress, so it is large) when noisy.
func tinyPNG(t testing.TB, w, h int, noisy bool) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(1, uint64(w)))
	for y := range h {
		for x := range w {
			c := color.NRGBA{uint8(x * 255 / max(w-1, 1)), uint8(y * 255 / max(h-1, 1)), 128, 255}
			if noisy {
				v := r.Uint32()
				c = color.NRGBA{uint8(v), uint8(v >> 8), uint8(v >> 16), 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var tinyPDF = []byte("%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n")

func mediaTool(t testing.TB, name, text string, ms ...tool.Media) *tool.Tool {
	return newTool(t, name, tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
		return tool.Result{Content: text, Media: ms}, nil
	}, readOnly)
}

// TestMediaItemShapes holds the item shapes of protocol 1.1's media
// outputs in golden files: text, then an input_image, an input_file and
// the note of what the model cannot take, in the tool's order; media that
// all became notes leave a string output.
func TestMediaItemShapes(t *testing.T) {
	set := mustSet(t,
		mediaTool(t, "shot", "A screenshot and its report.",
			tool.Media{MIMEType: "image/png", Data: tinyPNG(t, 2, 2, false), Source: "shots/a.png in your home"},
			tool.Media{MIMEType: "application/pdf", Data: tinyPDF, Filename: "reports/report.pdf", Source: "reports/report.pdf in your home"},
			tool.Media{MIMEType: "audio/wav", Data: []byte("RIFF\x00\x00\x00\x00WAVEfmt "), Source: "the MCP tool rec.play"}),
		mediaTool(t, "only_image", "", tool.Media{MIMEType: "image/png", Data: tinyPNG(t, 1, 1, false)}),
		mediaTool(t, "only_notes", "Two sounds.",
			tool.Media{MIMEType: "audio/mpeg", Data: []byte("ID3"), Source: "https://example.com/a.mp3"},
			tool.Media{MIMEType: "image/png", Data: []byte("not a png"), Source: "https://example.com/b.png"}),
	)
	d := &turn.Dispatcher{}
	res := dispatch(t, context.Background(), d, set, input(call("c1", "shot", "{}"), call("c2", "only_image", "{}"), call("c3", "only_notes", "{}")))
	for i, name := range []string{"media_item_mixed.json", "media_item_image_only.json", "media_item_notes_only.json"} {
		o := res.Outcomes[i]
		if o.Err != nil {
			t.Fatalf("%s: %v", o.Name, o.Err)
		}
		goldenfile.IndentedJSON(t, name, o.Item)
	}
	// What a gateway decodes.
	var fo protocol.FunctionCallOutput
	if err := json.Unmarshal(res.Outcomes[0].Item, &fo); err != nil {
		t.Fatal(err)
	}
	if len(fo.Content) != 4 || fo.Content[1].Type != protocol.ContentImage || fo.Content[2].Type != protocol.ContentFile || fo.Content[3].Type != protocol.ContentText {
		t.Fatalf("parts %+v", fo.Content)
	}
	if fo.Content[1].Detail != "auto" || fo.Content[2].Filename != "report.pdf" {
		t.Errorf("detail %q, filename %q", fo.Content[1].Detail, fo.Content[2].Filename)
	}
	if got := res.Outcomes[0].MediaNotes(); len(got) != 4 || got[0] != "" || !strings.Contains(got[1], "from shots/a.png in your home") || got[3] != "" {
		t.Errorf("media notes %q", got)
	}
	if res.Outcomes[2].MediaNotes() != nil || !strings.HasPrefix(string(res.Outcomes[2].Item), `{"type":"function_call_output","call_id":"c3","output":"Two sounds.\n[left out: audio/mpeg content (3 bytes) from https://example.com/a.mp3`) {
		t.Errorf("notes only: %s", res.Outcomes[2].Item)
	}
}

// TestMediaBudgetScalesImages: an image over the media budget is scaled
// down to it, and stays an input_image.
func TestMediaBudgetScalesImages(t *testing.T) {
	big := tinyPNG(t, 600, 400, true)
	const budget = 40 << 10
	if len(big) < 2*budget {
		t.Fatalf("test image of %d bytes", len(big))
	}
	set := mustSet(t, mediaTool(t, "shot", "here", tool.Media{MIMEType: "image/png", Data: big, Source: "big.png"}))
	d := &turn.Dispatcher{MediaBudget: budget}
	res := dispatch(t, context.Background(), d, set, input(call("c1", "shot", "{}")))
	var fo protocol.FunctionCallOutput
	if err := json.Unmarshal(res.Outcomes[0].Item, &fo); err != nil {
		t.Fatal(err)
	}
	if len(fo.Content) != 2 || fo.Content[1].Type != protocol.ContentImage {
		t.Fatalf("item %.300s", res.Outcomes[0].Item)
	}
	if n := len(fo.Content[1].ImageURL); n > budget || !strings.HasPrefix(fo.Content[1].ImageURL, "data:image/jpeg;base64,") {
		t.Errorf("image URL of %d bytes (budget %d): %.40s", n, budget, fo.Content[1].ImageURL)
	}
}

// TestStepDoneWithMediaFits: a step whose outputs each hold an image
// within the media budget, but together more than one event, still has
// one item per call in a step.done that fits: the largest images become
// notes that say where they are, as many as fit stay images.
func TestStepDoneWithMediaFits(t *testing.T) {
	const maxEvent = 200 << 10
	var ts []*tool.Tool
	var calls []protocol.CallItem
	names := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	for i, n := range names {
		ts = append(ts, mediaTool(t, n, "shot "+n, tool.Media{MIMEType: "image/png", Data: tinyPNG(t, 120+10*i, 100, true), Source: n + ".png in your home"}))
		calls = append(calls, call("c"+n, n, "{}"))
	}
	calls = append(calls, call("text", "plain", "{}"))
	ts = append(ts, newTool(t, "plain", tool.Parallel, reply(strings.Repeat("words ", 2000)), readOnly))
	d := &turn.Dispatcher{MaxEventBytes: maxEvent, MediaBudget: 60 << 10}
	res := dispatch(t, context.Background(), d, mustSet(t, ts...), input(calls...))
	done := &protocol.StepDone{Type: protocol.EventStepDone, AgentID: "a1", TurnID: "t1", Step: 3, Items: res.Items(), MediaNotes: res.MediaNotes()}
	before, _ := json.Marshal(done)
	if len(before) <= maxEvent {
		t.Fatalf("the step.done is only %d bytes: the test does not test", len(before))
	}
	if err := wire.FitStepDone(done, maxEvent); err != nil {
		t.Fatal(err)
	}
	after, _ := json.Marshal(done)
	if len(after) > maxEvent {
		t.Fatalf("step.done of %d bytes, over %d", len(after), maxEvent)
	}
	if len(done.Items) != len(calls) {
		t.Fatalf("%d items for %d calls", len(done.Items), len(calls))
	}
	images, notes := 0, 0
	for i, raw := range done.Items {
		var fo protocol.FunctionCallOutput
		if err := json.Unmarshal(raw, &fo); err != nil || fo.CallID != calls[i].CallID {
			t.Fatalf("item %d: %v %s", i, err, raw)
		}
		if i == len(calls)-1 {
			if fo.Output != strings.Repeat("words ", 2000) {
				t.Error("the text output was clipped although dropping images was enough")
			}
			continue
		}
		switch {
		case len(fo.Content) == 2 && fo.Content[1].Type == protocol.ContentImage:
			images++
		case len(fo.Content) == 0 && strings.Contains(fo.Output, "[left out: an image/") && strings.Contains(fo.Output, "from "+names[i]+".png in your home") &&
			strings.Contains(fo.Output, "over the size limit of one event"):
			notes++
		default:
			t.Errorf("item %d: %.300s", i, raw)
		}
	}
	if images == 0 || notes == 0 {
		t.Errorf("%d images and %d notes: want both", images, notes)
	}
}

// TestMediaOutcomeFitsTheJournal: the journal record of a media outcome
// (the item, and the notes beside it) stays within the event budget, even
// when the tool's text fills it.
func TestMediaOutcomeFitsTheJournal(t *testing.T) {
	const maxEvent = 24 << 10
	var ms []tool.Media
	for i := range 20 {
		ms = append(ms, tool.Media{MIMEType: "image/png", Data: tinyPNG(t, 8, 8+i%3, true), Source: strings.Repeat("a-long-source/", 40) + "x.png"})
	}
	set := mustSet(t, mediaTool(t, "shots", strings.Repeat("text ", 3500), ms...))
	d := &turn.Dispatcher{MaxEventBytes: maxEvent}
	res := dispatch(t, context.Background(), d, set, input(call("c1", "shots", "{}")))
	o := res.Outcomes[0]
	record, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(record) > maxEvent+protocol.HeaderRoom {
		t.Errorf("the journal record is %d bytes, over %d", len(record), maxEvent+protocol.HeaderRoom)
	}
	var fo protocol.FunctionCallOutput
	if err := json.Unmarshal(o.Item, &fo); err != nil {
		t.Fatal(err)
	}
	if len(fo.Content) > 0 && len(o.MediaNotes()) != len(fo.Content) {
		t.Errorf("%d notes for %d parts", len(o.MediaNotes()), len(fo.Content))
	}
	if len(fo.Content) == 0 && o.MediaNotes() != nil {
		t.Errorf("notes kept for an output without media")
	}
}

// TestAbortedTurnSkipsTheFitting: the media of a call that returns once
// its turn is aborted are not decoded and scaled (work a cancel must not
// wait for: up to a few seconds an image) but left out with a note.
func TestAbortedTurnSkipsTheFitting(t *testing.T) {
	big := tinyPNG(t, 600, 400, true)
	started := make(chan struct{})
	set := mustSet(t, newTool(t, "shot", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
		close(started)
		<-ctx.Done()
		return tool.Result{Content: "partial", Media: []tool.Media{{MIMEType: "image/png", Data: big, Source: "big.png"}}}, context.Cause(ctx)
	}))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		<-started
		cancel(turn.ErrCancelled)
	}()
	res := dispatch(t, ctx, &turn.Dispatcher{MediaBudget: 40 << 10}, set, input(call("c1", "shot", "{}")))
	o := res.Outcomes[0]
	if kind(o) != tool.Aborted || o.MediaNotes() != nil {
		t.Fatalf("kind %q, notes %q", kind(o), o.MediaNotes())
	}
	if want := "its call was stopped before the image was fitted]"; !strings.Contains(output(t, o), want) {
		t.Errorf("output %q does not say %q", output(t, o), want)
	}
}
