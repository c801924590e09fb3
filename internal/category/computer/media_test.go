package computer_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/media"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// picture is a w×h PNG: a gradient, or noise (large, as a photo is) when
// noisy. Noise is stored uncompressed: deflate finds nothing in it to
// save, and trying is most of what making the picture costs under -race.
func picture(t testing.TB, w, h int, noisy bool) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(uint64(w), uint64(h)))
	enc := png.Encoder{}
	if noisy {
		enc.CompressionLevel = png.NoCompression
	}
	for y := range h {
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for x := 0; x < len(row); x += 4 {
			if noisy {
				v := r.Uint32()
				row[x], row[x+1], row[x+2] = uint8(v), uint8(v>>8), uint8(v>>16)
			} else {
				row[x], row[x+1], row[x+2] = uint8(x/4), uint8(y), 90
			}
			row[x+3] = 255
		}
	}
	var b bytes.Buffer
	if err := enc.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func pdfOf(n int) []byte {
	return append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte("0123456789\n"), n/11)...)
}

func writeBytes(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadFileMedia: read_file returns an image or a PDF as media, by
// what its bytes are, whatever its name; a text file named .png is text;
// a byte range of an image is refused as binary, as for any file; the home's
// confinement holds for media as for text.
func TestReadFileMedia(t *testing.T) {
	c, tmp, a1 := hostileSetup(t)
	shot := picture(t, 30, 20, false)
	writeBytes(t, filepath.Join(a1, "shots", "shot.dat"), shot)
	writeBytes(t, filepath.Join(a1, "report.pdf"), pdfOf(2000))
	writeFile(t, filepath.Join(a1, "fake.png"), "just text\n")
	writeBytes(t, filepath.Join(tmp, "outside.png"), shot)
	if err := os.Symlink(filepath.Join(tmp, "outside.png"), filepath.Join(a1, "out.png")); err != nil {
		t.Fatal(err)
	}

	res, err := run(t, c, computer.ReadFileName, `{"path":"shots/shot.dat"}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Media) != 1 || res.Media[0].MIMEType != media.PNG || !bytes.Equal(res.Media[0].Data, shot) ||
		res.Media[0].Source != "shots/shot.dat in your home" || res.Media[0].Filename != "shots/shot.dat" {
		t.Errorf("media %+v", res.Media)
	}
	if res.Content != "shots/shot.dat: an image (image/png), 30×20 pixels, "+byteSize(len(shot))+"." {
		t.Errorf("content %q", res.Content)
	}

	res, err = run(t, c, computer.ReadFileName, `{"path":"report.pdf","start_line":3}`)
	if err != nil || len(res.Media) != 1 || res.Media[0].MIMEType != media.PDF || res.Content != "report.pdf: a PDF file, 2.0 KiB." {
		t.Errorf("pdf: %v %q %d media", err, res.Content, len(res.Media))
	}

	res, err = run(t, c, computer.ReadFileName, `{"path":"fake.png"}`)
	if err != nil || len(res.Media) != 0 || !strings.Contains(res.Content, "just text") {
		t.Errorf("text named .png: %v %q", err, res.Content)
	}

	if _, err := run(t, c, computer.ReadFileName, `{"path":"shots/shot.dat","offset":1}`); err == nil || !strings.Contains(err.Error(), "looks binary") {
		t.Errorf("a byte range of an image: %v", err)
	}

	if res, err := run(t, c, computer.ReadFileName, `{"path":"out.png"}`); err == nil || len(res.Media) != 0 {
		t.Errorf("an image outside the home through a link was read: %v", err)
	}

	small := newCategory(t, computer.Config{MaxFileBytes: 1000})
	writeBytes(t, filepath.Join(home(t, small, agent), "big.pdf"), pdfOf(5000))
	if _, err := run(t, small, computer.ReadFileName, `{"path":"big.pdf"}`); err == nil || !strings.Contains(err.Error(), "larger than the 1000 bytes read_file reads whole") {
		t.Errorf("a PDF over the file limit: %v", err)
	}
}

// byteSize is n as read_file writes a size below 1 KiB.
func byteSize(n int) string { return strconv.Itoa(n) + " bytes" }

// mediaEvent is a call.output or step.done with its items decoded.
type mediaEvent struct {
	Type  string                        `json:"type"`
	Call  string                        `json:"call_id"`
	Item  protocol.FunctionCallOutput   `json:"item"`
	Items []protocol.FunctionCallOutput `json:"items"`
	size  int
}

// TestMediaOverNATS: through a real worker on NATS (1 MiB max payload), an
// image file reaches the model as an input_image in call.output and
// step.done; an image over the media budget is scaled down and fits it;
// a PDF over it is a note naming the file; and a step of ten large
// images still has a step.done within the max payload, one item per
// call, with as many images as fit and notes for the others.
func TestMediaOverNATS(t *testing.T) {
	// Its own server and homes; CPU-bound under -race, it overlaps the
	// tests that wait for commands.
	t.Parallel()
	srv := natstest.Start(t)
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	shot := picture(t, 40, 30, false)
	writeBytes(t, filepath.Join(h, "shot.png"), shot)
	writeBytes(t, filepath.Join(h, "report.pdf"), pdfOf(400<<10))
	// Each is over the budget as a PNG. a.png is over it even as a JPEG
	// of its full size, so it must be scaled down; the others are sized
	// to fit as JPEGs, which spares five scalings under -race and leaves
	// ten of them still well over a max payload together.
	for i, wh := range [][2]int{{600, 450}, {480, 360}, {490, 370}, {500, 375}, {470, 350}, {460, 345}} {
		writeBytes(t, filepath.Join(h, "big", string(rune('a'+i))+".png"), picture(t, wh[0], wh[1], true))
	}
	workertest.RunWorker(t, srv, "w1", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{c.Category()}, nil
	})
	gw := workertest.NewGateway(t, srv)

	step := func(turnID string, paths ...string) (map[string]mediaEvent, mediaEvent) {
		t.Helper()
		oc, err := gw.JS.OrderedConsumer(context.Background(), protocol.StreamOutputs,
			jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, agent, turnID)}})
		if err != nil {
			t.Fatal(err)
		}
		var calls []workertest.Call
		for i, p := range paths {
			calls = append(calls, workertest.FC(callID(i), computer.ReadFileName, `{"path":"`+p+`"}`))
		}
		gw.SendStep(protocol.PrefixCall, agent, turnID, 0, protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{"computer": true}}, calls...)
		outs := map[string]mediaEvent{}
		for {
			m, err := oc.Next(jetstream.FetchMaxWait(30 * time.Second))
			if err != nil {
				t.Fatalf("waiting for the events of %s: %v", turnID, err)
			}
			var ev mediaEvent
			if err := json.Unmarshal(m.Data(), &ev); err != nil {
				t.Fatal(err)
			}
			ev.size = len(m.Data()) + headerBytes(m.Headers())
			if ev.Type == protocol.EventStepDone {
				return outs, ev
			}
			outs[ev.Call] = ev
		}
	}

	t.Run("an image file", func(t *testing.T) {
		outs, done := step("t-shot", "shot.png")
		want := []protocol.InputContent{
			{Type: "input_text", Text: "shot.png: an image (image/png), 40×30 pixels, " + byteSize(len(shot)) + "."},
			{Type: "input_image", ImageURL: media.DataURL(media.PNG, shot), Detail: "auto"},
		}
		for where, fo := range map[string]protocol.FunctionCallOutput{"call.output": outs["c0"].Item, "step.done": done.Items[0]} {
			if len(fo.Content) != 2 || fo.Content[0] != want[0] || fo.Content[1] != want[1] {
				t.Errorf("%s: %+v", where, fo.Content)
			}
		}
	})

	t.Run("an image over the budget, a PDF over it", func(t *testing.T) {
		outs, done := step("t-big", "big/a.png", "report.pdf")
		for where, items := range map[string][]protocol.FunctionCallOutput{"call.output": {outs["c0"].Item, outs["c1"].Item}, "step.done": done.Items} {
			img := items[0]
			if len(img.Content) != 2 || img.Content[1].Type != "input_image" || len(img.Content[1].ImageURL) > media.DefaultBudget ||
				!strings.HasPrefix(img.Content[1].ImageURL, "data:image/jpeg;base64,") {
				t.Errorf("%s: big image %.200v", where, img.Content)
			} else if info, err := media.Probe(dataOf(t, img.Content[1].ImageURL)); err != nil || info.Width >= 600 || info.Height >= 450 {
				t.Errorf("%s: the image was not scaled down: %+v %v", where, info, err)
			}
			if pdf := items[1]; pdf.Content != nil || !strings.Contains(pdf.Output, "[left out: the PDF file report.pdf (400 KiB) from report.pdf in your home, because it does not fit the 256 KiB of media one output may hold]") {
				t.Errorf("%s: big PDF %.300q", where, pdf.Output)
			}
		}
	})

	t.Run("a step of ten large images", func(t *testing.T) {
		var paths []string
		for i := range 10 {
			paths = append(paths, "big/"+string(rune('a'+i%6))+".png")
		}
		outs, done := step("t-ten", paths...)
		sum := 0
		for _, o := range outs {
			for _, c := range o.Item.Content {
				sum += len(c.ImageURL)
			}
		}
		if int64(sum) <= gw.NC.MaxPayload() {
			t.Fatalf("the images add up to %d bytes, under the max payload: the test does not test", sum)
		}
		if max := gw.NC.MaxPayload(); int64(done.size) > max {
			t.Errorf("step.done of %d bytes, over the max payload of %d", done.size, max)
		}
		if len(done.Items) != len(paths) {
			t.Fatalf("%d items for %d calls", len(done.Items), len(paths))
		}
		images, notes := 0, 0
		for i, fo := range done.Items {
			if len(outs[callID(i)].Item.Content) != 2 {
				t.Errorf("call.output %d holds no image", i)
			}
			switch {
			case len(fo.Content) == 2 && fo.Content[1].Type == "input_image":
				images++
			case strings.Contains(fo.Output, "from "+paths[i]+" in your home, because the step's outputs were over the size limit of one event"):
				notes++
			default:
				t.Errorf("item %d: %.300q", i, fo.Output)
			}
		}
		if images < 2 || notes < 1 {
			t.Errorf("%d images, %d notes", images, notes)
		}
	})
}

// headerBytes is the length of h as the client writes it.
func headerBytes(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

func dataOf(t *testing.T, url string) []byte {
	t.Helper()
	_, b64, _ := strings.Cut(url, ";base64,")
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func callID(i int) string { return "c" + strconv.Itoa(i) }
