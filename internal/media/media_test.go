package media

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
)

// noise is a w×h image of random pixels: it compresses badly, so its
// encodings are large, as a photo's are.
func noise(w, h int, alpha bool) *image.NRGBA {
	r := rand.New(rand.NewPCG(uint64(w), uint64(h)))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		v := r.Uint32()
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = byte(v), byte(v>>8), byte(v>>16), 0xff
		if alpha {
			img.Pix[i+3] = byte(v >> 24)
		}
	}
	return img
}

// noisePNG encodes noise uncompressed: deflate finds nothing to save in
// it, and trying would be most of what these tests cost under -race. Fit
// reads it as any PNG.
func noisePNG(t testing.TB, img *image.NRGBA) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeGIF(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// fromURL decodes a part's data URL.
func fromURL(t testing.TB, u string) (string, []byte) {
	t.Helper()
	rest, ok := strings.CutPrefix(u, "data:")
	mime, b64, ok2 := strings.Cut(rest, ";base64,")
	if !ok || !ok2 {
		t.Fatalf("not a base64 data URL: %.60s", u)
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return mime, data
}

// bomb is a valid PNG header claiming w×h pixels, with one tiny IDAT.
func bomb(t testing.TB, w, h uint32) []byte {
	t.Helper()
	small := encodePNG(t, image.NewGray(image.Rect(0, 0, 1, 1)))
	// IHDR starts after the 8-byte signature: length, "IHDR", 13 bytes, CRC.
	out := bytes.Clone(small)
	binary.BigEndian.PutUint32(out[16:], w)
	binary.BigEndian.PutUint32(out[20:], h)
	binary.BigEndian.PutUint32(out[29:], crc32.ChecksumIEEE(out[12:29]))
	return out
}

// progBomb is a progressive grayscale JPEG of w×h whose scans are AC
// scans made of end-of-band runs: a few bytes each, every one visiting
// every block.
func progBomb(w, h, scans int) []byte {
	var b bytes.Buffer
	b.Write([]byte{0xff, 0xd8})
	// DQT
	b.Write([]byte{0xff, 0xdb, 0, 67, 0})
	for range 64 {
		b.WriteByte(1)
	}
	// SOF2
	b.Write([]byte{0xff, 0xc2, 0, 11, 8})
	binary.Write(&b, binary.BigEndian, uint16(h))
	binary.Write(&b, binary.BigEndian, uint16(w))
	b.Write([]byte{1, 1, 0x11, 0})
	// DHT: DC table 0 one code length 1 for symbol 0; AC table 0 one code length 1 for 0xE0
	b.Write([]byte{0xff, 0xc4, 0, 20, 0x00, 1})
	b.Write(make([]byte, 15))
	b.WriteByte(0)
	b.Write([]byte{0xff, 0xc4, 0, 20, 0x10, 1})
	b.Write(make([]byte, 15))
	b.WriteByte(0xe0)
	blocks := ((w + 7) / 8) * ((h + 7) / 8)
	codes := (blocks + 16383) / 16384
	dataBytes := (codes*15 + 7) / 8
	for range scans {
		b.Write([]byte{0xff, 0xda, 0, 8, 1, 1, 0x00, 1, 1, 0})
		b.Write(make([]byte, dataBytes+1))
	}
	b.Write([]byte{0xff, 0xd9})
	return b.Bytes()
}

// TestScanBombIsNotDecoded: a progressive JPEG of end-of-band scans costs
// a few bytes a scan and a pass over every block to decode; past MaxScans
// it is refused unread (decoding 1000 scans at 25 megapixels would hold a
// core for many seconds), and up to it an image decodes.
func TestScanBombIsNotDecoded(t *testing.T) {
	data := progBomb(5000, 5000, 1000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p := Fit(t.Context(), []Item{{Data: data}}, DefaultBudget, Options{})[0]
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Errorf("fitting a scan bomb allocated %d bytes", grown)
	}
	if want := "because it is a JPEG of more than 100 scans, too costly to decode]"; p.Kind != Text || !strings.HasSuffix(p.Text, want) {
		t.Errorf("got %+v, want a note ending %q", p, want)
	}
	for scans, kept := range map[int]bool{MaxScans: true, MaxScans + 1: false} {
		p := Fit(t.Context(), []Item{{Data: progBomb(64, 48, scans)}}, DefaultBudget, Options{})[0]
		if (p.Kind == Image) != kept {
			t.Errorf("%d scans: kept %v, want %v (%s)", scans, p.Kind == Image, kept, p.Text)
		}
	}
	if n := jpegScans(encodeJPEG(t, noise(30, 20, false))); n != 1 {
		t.Errorf("a baseline JPEG counted %d scans", n)
	}
}

func TestSniff(t *testing.T) {
	// testdata/gopher.webp is golang.org/x/image's
	// testdata/gopher-doc.1bpp.lossless.webp (BSD licence): a real WebP,
	// which Go cannot encode.
	webp, err := os.ReadFile("testdata/gopher.webp")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		data []byte
		want string
	}{
		{noisePNG(t, noise(2, 2, false)), PNG},
		{encodeJPEG(t, noise(2, 2, false)), JPEG},
		{encodeGIF(t, noise(2, 2, false)), GIF},
		{webp, WebP},
		{[]byte("%PDF-1.7\n%âãÏÓ\n"), PDF},
		{[]byte("<html><img src=x.png>"), ""},
		{[]byte("RIFF\x00\x00\x00\x00WAVEfmt "), ""},
		{nil, ""},
		{[]byte("\x89PN"), ""},
	} {
		if got := Sniff(c.data); got != c.want {
			t.Errorf("Sniff(%q…) = %q, want %q", c.data[:min(len(c.data), 12)], got, c.want)
		}
	}
}

func TestFitKeepsWhatFits(t *testing.T) {
	t.Parallel()
	pngData := noisePNG(t, noise(20, 10, true))
	webp, _ := os.ReadFile("testdata/gopher.webp")
	pdf := []byte("%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n")
	parts := Fit(t.Context(), []Item{{MIMEType: "image/png", Data: pngData}, {Data: webp}, {MIMEType: PDF, Data: pdf, Filename: "r.pdf"}, {Data: pdf}}, 1<<20, Options{})
	if parts[0].Kind != Image || parts[0].URL != DataURL(PNG, pngData) {
		t.Errorf("a PNG that fits is sent as it is, got %+v", parts[0].Kind)
	}
	if parts[1].Kind != Image || parts[1].URL != DataURL(WebP, webp) {
		t.Errorf("a WebP that fits is sent as it is")
	}
	if parts[2].Kind != File || parts[2].Filename != "r.pdf" || parts[2].URL != DataURL(PDF, pdf) {
		t.Errorf("a PDF that fits is a file part, got %+v", parts[2])
	}
	if parts[3].Filename != DefaultFilename {
		t.Errorf("a PDF without a name is named %q, got %q", DefaultFilename, parts[3].Filename)
	}
	for _, p := range parts {
		if !strings.Contains(p.Note, "[left out: ") || !strings.Contains(p.Note, "step's outputs were over") {
			t.Errorf("a kept part carries its step note, got %q", p.Note)
		}
	}
}

func TestFitScalesAnImageDown(t *testing.T) {
	t.Parallel() // CPU only; the tests that read MemStats are serial, so they run before it
	for _, c := range []struct {
		name     string
		data     []byte
		wantMIME string
	}{
		{"opaque png to jpeg", noisePNG(t, noise(900, 600, false)), JPEG},
		{"jpeg", encodeJPEG(t, noise(1000, 700, false)), JPEG},
		{"transparent png stays png", noisePNG(t, noise(600, 400, true)), PNG},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			const budget = 48 << 10
			if len(c.data) < budget {
				t.Fatalf("the test image is only %d bytes", len(c.data))
			}
			parts := Fit(t.Context(), []Item{{MIMEType: "image/png", Data: c.data, Source: "shots/a.png"}}, budget, Options{})
			p := parts[0]
			if p.Kind != Image {
				t.Fatalf("got a %v part: %s", p.Kind, p.Text)
			}
			if len(p.URL) > budget {
				t.Errorf("the scaled image's URL is %d bytes, over %d", len(p.URL), budget)
			}
			mime, data := fromURL(t, p.URL)
			if mime != c.wantMIME {
				t.Errorf("scaled to %s, want %s", mime, c.wantMIME)
			}
			info, err := Probe(data)
			if err != nil || info.MIMEType != mime {
				t.Fatalf("the scaled image does not decode as %s: %v %+v", mime, err, info)
			}
			orig, _ := Probe(c.data)
			if info.Width >= orig.Width || info.Height >= orig.Height {
				t.Errorf("not scaled down: %d×%d from %d×%d", info.Width, info.Height, orig.Width, orig.Height)
			}
			// The aspect ratio is kept (within a pixel's rounding).
			if r0, r1 := float64(orig.Width)/float64(orig.Height), float64(info.Width)/float64(info.Height); r1 < r0*0.97 || r1 > r0*1.03 {
				t.Errorf("aspect %.3f became %.3f", r0, r1)
			}
			if !strings.Contains(p.Note, "from shots/a.png") {
				t.Errorf("step note %q does not say where the image is", p.Note)
			}
		})
	}
}

func TestFitGIFBecomesPNG(t *testing.T) {
	t.Parallel()
	parts := Fit(t.Context(), []Item{{Data: encodeGIF(t, noise(30, 20, false))}}, 1<<20, Options{})
	if mime, data := fromURL(t, parts[0].URL); mime != PNG || Sniff(data) != PNG {
		t.Errorf("a GIF is sent as a PNG of its first frame, got %s", mime)
	}
}

func TestFitNotes(t *testing.T) {
	t.Parallel()
	bigPDF := append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte("x"), 100<<10)...)
	garbage := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 500)...)
	for _, c := range []struct {
		name string
		item Item
		want []string
	}{
		{"pdf over the budget", Item{MIMEType: PDF, Data: bigPDF, Filename: "docs/report.pdf", Source: "https://example.com/report.pdf"},
			[]string{"[left out: the PDF file report.pdf (100 KiB) from https://example.com/report.pdf, because it does not fit the 32 KiB of media one output may hold]"}},
		{"undecodable image", Item{MIMEType: "image/png", Data: garbage, Source: "a.png in your home"},
			[]string{"[left out: an image/png image (508 bytes) from a.png in your home, because it does not decode as an image (not a PNG"}},
		{"declared image, other bytes", Item{MIMEType: "image/png", Data: []byte("<html>"), Source: "the MCP tool x.y"},
			[]string{"its bytes are not a PNG, JPEG, GIF or WebP image"}},
		{"declared pdf, other bytes", Item{MIMEType: "application/pdf", Data: []byte("hello")}, []string{"its bytes are not a PDF file"}},
		{"audio", Item{MIMEType: "audio/wav", Data: []byte("RIFF\x00\x00\x00\x00WAVE")},
			[]string{"[left out: audio/wav content (12 bytes), because the model reads only images (PNG, JPEG, GIF, WebP) and PDF files]"}},
		{"no type", Item{Data: []byte{1, 2, 3}}, []string{"[left out: content of unknown type (3 bytes)"}},
		{"bomb", Item{MIMEType: "image/png", Data: bomb(t, 100000, 100000)}, []string{"at 100000×100000 pixels it is over the 25-megapixel limit"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			parts := Fit(t.Context(), []Item{c.item}, 32<<10, Options{})
			if len(parts) != 1 || parts[0].Kind != Text || parts[0].URL != "" {
				t.Fatalf("want one text part, got %+v", parts)
			}
			for _, w := range c.want {
				if !strings.Contains(parts[0].Text, w) {
					t.Errorf("note %q\ndoes not contain %q", parts[0].Text, w)
				}
			}
		})
	}
}

// TestBombIsNotDecoded holds the pixel check before decoding: a PNG that
// claims 40000×40000 pixels (6.4 GB of RGBA) costs next to nothing.
func TestBombIsNotDecoded(t *testing.T) {
	data := bomb(t, 40000, 40000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	Fit(t.Context(), []Item{{Data: data}}, 1<<20, Options{})
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Errorf("fitting a bomb allocated %d bytes", grown)
	}
}

func TestFitSharesTheBudget(t *testing.T) {
	t.Parallel()
	small := noisePNG(t, noise(8, 8, false))
	big1 := noisePNG(t, noise(800, 600, false))
	big2 := encodeJPEG(t, noise(800, 600, false))
	pdf := append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte("x"), 200<<10)...)
	const budget = 96 << 10
	parts := Fit(t.Context(), []Item{{Data: big1}, {Data: pdf}, {Data: small}, {Data: big2}}, budget, Options{})
	total := 0
	for _, p := range parts {
		total += len(p.URL)
	}
	if total > budget {
		t.Errorf("the parts' URLs add up to %d, over %d", total, budget)
	}
	if parts[2].URL != DataURL(PNG, small) {
		t.Error("the small image is kept whole")
	}
	if parts[1].Kind != Text || parts[0].Kind != Image || parts[3].Kind != Image {
		t.Errorf("kinds %v %v %v %v", parts[0].Kind, parts[1].Kind, parts[2].Kind, parts[3].Kind)
	}
	// The PDF's share went to the images after it: each got more than a
	// quarter.
	if len(parts[3].URL) <= budget/4 && len(parts[0].URL) <= budget/4 {
		t.Errorf("the images got %d and %d bytes: the left-out PDF's share was not passed on", len(parts[0].URL), len(parts[3].URL))
	}
}

func TestFitTinyBudget(t *testing.T) {
	t.Parallel()
	parts := Fit(t.Context(), []Item{{Data: noisePNG(t, noise(500, 500, false)), Source: "x"}}, 300, Options{})
	if parts[0].Kind != Text || !strings.Contains(parts[0].Text, "even scaled down from 500×500 pixels") {
		t.Errorf("an image that cannot fit even small is a note, got %+v", parts[0])
	}
}

// withBadChunk inserts, after IHDR, a chunk of type typ whose checksum is
// wrong.
func withBadChunk(t testing.TB, data []byte, typ string) []byte {
	t.Helper()
	chunk := binary.BigEndian.AppendUint32(nil, 5)
	chunk = append(chunk, typ...)
	chunk = append(chunk, "hello"...)
	chunk = binary.BigEndian.AppendUint32(chunk, 12345)
	at := 8 + 12 + 13
	return append(append(bytes.Clone(data[:at]), chunk...), data[at:]...)
}

// TestFitRepairsBadAncillaryChunks: a PNG whose colour profile chunk has
// a wrong checksum (as the MCP reference server's image does) is sent
// without that chunk, as browsers show it; a broken critical chunk is
// still refused.
func TestFitRepairsBadAncillaryChunks(t *testing.T) {
	t.Parallel()
	good := noisePNG(t, noise(10, 10, false))
	broken := withBadChunk(t, good, "iCCP")
	if _, err := png.Decode(bytes.NewReader(broken)); err == nil {
		t.Fatal("Go's decoder takes the broken file: the test does not test")
	}
	p := Fit(t.Context(), []Item{{Data: broken}}, 1<<20, Options{})[0]
	if p.Kind != Image || p.URL != DataURL(PNG, good) {
		t.Errorf("a PNG with a broken iCCP chunk: %+v", p)
	}
	if p := Fit(t.Context(), []Item{{Data: withBadChunk(t, good, "IDAT")}}, 1<<20, Options{})[0]; p.Kind != Text {
		t.Errorf("a PNG with a broken critical chunk is kept")
	}
}

// TestSlotsAreGivenBack: Fits sharing one slot all finish, and leave it
// free, whatever their images did (kept, scaled, refused).
func TestSlotsAreGivenBack(t *testing.T) {
	slots := NewSlots(1)
	items := [][]Item{
		{{Data: noisePNG(t, noise(10, 10, false))}},
		{{Data: noisePNG(t, noise(200, 200, false))}},
		{{Data: bomb(t, 50000, 50000)}},
		{{Data: append([]byte("\x89PNG\r\n\x1a\n"), 1, 2, 3)}},
	}
	done := make(chan struct{})
	for _, it := range items {
		go func() {
			Fit(t.Context(), it, 8<<10, Options{Slots: slots})
			done <- struct{}{}
		}()
	}
	for range items {
		<-done
	}
	if !slots.sem.TryAcquire(slots.n) {
		t.Error("slots still taken")
	}
}

func TestFitBoundsTheItems(t *testing.T) {
	t.Parallel()
	one := noisePNG(t, noise(2, 2, false))
	items := make([]Item, 5000)
	for i := range items {
		items[i] = Item{Data: one}
	}
	parts := Fit(t.Context(), items, 1<<20, Options{})
	if len(parts) != MaxItems+1 || parts[MaxItems].Text != "[left out: 4980 more images and files, because one output holds at most 20]" {
		t.Fatalf("%d parts, last %+v", len(parts), parts[len(parts)-1])
	}
	for _, p := range parts[:MaxItems] {
		if p.Kind != Image {
			t.Fatalf("part %+v", p)
		}
	}
}

// withOrientation inserts an EXIF APP1 segment of orientation o after a
// JPEG's SOI marker, in byte order bo ("MM" or "II").
func withOrientation(data []byte, o uint16, bo string) []byte {
	var order binary.AppendByteOrder = binary.BigEndian
	if bo == "II" {
		order = binary.LittleEndian
	}
	tiff := []byte(bo)
	tiff = order.AppendUint16(tiff, 42)
	tiff = order.AppendUint32(tiff, 8)
	tiff = order.AppendUint16(tiff, 1)
	tiff = order.AppendUint16(tiff, 0x0112)
	tiff = order.AppendUint16(tiff, 3)
	tiff = order.AppendUint32(tiff, 1)
	tiff = order.AppendUint16(tiff, o)
	tiff = append(tiff, 0, 0, 0, 0, 0, 0)
	seg := append([]byte("Exif\x00\x00"), tiff...)
	out := append([]byte{0xff, 0xd8, 0xff, 0xe1}, byte((len(seg)+2)>>8), byte(len(seg)+2))
	out = append(out, seg...)
	return append(out, data[2:]...)
}

// TestFitTurnsAScaledPhoto: a phone's photo is stored sideways with an
// EXIF orientation; its scaled copy has no EXIF, so it is turned in its
// pixels and reaches the model upright.
func TestFitTurnsAScaledPhoto(t *testing.T) {
	t.Parallel()
	// Left half red, right half blue, noisy so that it must be scaled.
	img := noise(800, 200, false)
	for y := range 200 {
		for x := range 800 {
			i := img.PixOffset(x, y)
			if x < 400 {
				img.Pix[i+2] = 0
			} else {
				img.Pix[i] = 0
			}
			img.Pix[i+1] = 0
		}
	}
	plain := encodeJPEG(t, img)
	// red reports whether the top left corner of the part's image is red.
	red := func(p Part) (int, int, bool) {
		_, data := fromURL(t, p.URL)
		m, _, err := image.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		b := m.Bounds()
		var rs, bs uint32
		for y := range b.Dy() / 4 {
			for x := range b.Dx() / 4 {
				r, _, bl, _ := m.At(b.Min.X+x, b.Min.Y+y).RGBA()
				rs, bs = rs+r, bs+bl
			}
		}
		return b.Dx(), b.Dy(), rs > bs
	}
	for _, tc := range []struct {
		o        uint16
		bo       string
		tall     bool
		redFirst bool
	}{{1, "MM", false, true}, {3, "II", false, false}, {6, "MM", true, true}, {8, "II", true, false}, {2, "MM", false, false}} {
		p := Fit(t.Context(), []Item{{Data: withOrientation(plain, tc.o, tc.bo)}}, 20<<10, Options{})[0]
		if p.Kind != Image {
			t.Fatalf("orientation %d: %s", tc.o, p.Text)
		}
		w, h, r := red(p)
		if (h > w) != tc.tall || r != tc.redFirst {
			t.Errorf("orientation %d: %d×%d, red top left %v; want tall %v, red %v", tc.o, w, h, r, tc.tall, tc.redFirst)
		}
	}
	if o := jpegOrientation(plain); o != 1 {
		t.Errorf("a JPEG without EXIF has orientation %d", o)
	}
}

// doneAfter is a context that is done from its limit-th Err on: a
// deterministic "cancelled while decoding".
type doneAfter struct {
	context.Context
	calls, limit int
}

func (c *doneAfter) Err() error {
	if c.calls++; c.calls > c.limit {
		return context.Canceled
	}
	return nil
}

// TestFitStopsWithItsContext: images are left out once Fit's context is
// done, and a decode under way stops at its next read (a 25-megapixel
// JPEG of 100 scans, 6 KB, otherwise takes seconds).
func TestFitStopsWithItsContext(t *testing.T) {
	bomb := progBomb(5000, 5000, MaxScans)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	parts := Fit(ctx, []Item{{Data: bomb}, {Data: noisePNG(t, noise(10, 10, false))}, {Data: []byte("%PDF-1.4 x"), Filename: "a.pdf"}}, DefaultBudget, Options{Slots: NewSlots(1)})
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Errorf("fitting after the end allocated %d bytes", grown)
	}
	for i, p := range parts[:2] {
		if p.Kind != Text || !strings.HasSuffix(p.Text, "because its call was stopped before the image was fitted]") {
			t.Errorf("image %d: %+v", i, p)
		}
	}
	if parts[2].Kind != File {
		t.Errorf("a PDF costs nothing to keep: %+v", parts[2])
	}
	// Done after three reads of the file's 6 KB (readChunk each).
	c := &doneAfter{Context: t.Context(), limit: 3}
	if _, _, err := decode(c, bomb, DefaultMaxPixels); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("a decode whose context ended: %v", err)
	}
	if c.calls != 4 {
		t.Errorf("the decoder read %d times past its context's end", c.calls-4)
	}
}

// TestSlotsBoundThePixels: an image of the whole pixel limit takes every
// slot, small ones one each, so the images decoded at once hold at most
// the limit's pixels together, however many slots there are.
func TestSlotsBoundThePixels(t *testing.T) {
	s := NewSlots(8)
	const limit = 1 << 20
	for _, c := range []struct{ pixels, want int64 }{
		{1, 1}, {limit / 8, 1}, {limit/8 + 1, 2}, {limit / 2, 4}, {limit, 8}, {limit + 1, 1}, {0, 1},
	} {
		if got := s.weight(c.pixels, limit); got != c.want {
			t.Errorf("%d pixels take %d slots, want %d", c.pixels, got, c.want)
		}
	}
	// One slot held: a small image does not wait for it, a full-size one
	// does (and, first in line, makes later ones wait behind it).
	release, err := s.take(t.Context(), 1, limit)
	if err != nil {
		t.Fatal(err)
	}
	if p := Fit(t.Context(), []Item{{Data: noisePNG(t, noise(10, 10, false))}}, DefaultBudget, Options{MaxPixels: limit, Slots: s})[0]; p.Kind != Image {
		t.Errorf("small image: %+v", p)
	}
	big := encodePNG(t, image.NewGray(image.Rect(0, 0, 1024, 1024)))
	done := make(chan Part)
	go func() {
		done <- Fit(t.Context(), []Item{{Data: big}}, DefaultBudget, Options{MaxPixels: limit, Slots: s})[0]
	}()
	select {
	case p := <-done:
		t.Fatalf("a full-size image was fitted while a slot was held: %+v", p)
	default:
	}
	release()
	if p := <-done; p.Kind != Image {
		t.Errorf("full-size image: %+v", p)
	}
}
