package media

import (
	"os"
	"testing"
)

// FuzzFit feeds untrusted bytes through the decode and scale path: it
// must not panic, must honour the budget, and whatever image it keeps
// must be an image the model can take.
func FuzzFit(f *testing.F) {
	webp, _ := os.ReadFile("testdata/gopher.webp")
	f.Add(webp, 4096)
	f.Add(encodePNG(f, noise(40, 30, true)), 2048)
	f.Add(encodeJPEG(f, noise(40, 30, false)), 1500)
	f.Add(encodeGIF(f, noise(12, 9, false)), 9000)
	f.Add(bomb(f, 30000, 30000), 1<<20)
	f.Add([]byte("%PDF-1.7\n"), 100)
	f.Add(progBomb(40, 30, 3), 3000)
	f.Add(withBadChunk(f, encodePNG(f, noise(6, 6, true)), "iCCP"), 5000)
	f.Fuzz(func(t *testing.T, data []byte, budget int) {
		budget = max(budget%(256<<10), 0)
		// A low pixel limit keeps each run fast; the check is the same.
		parts := Fit(t.Context(), []Item{{MIMEType: "image/png", Data: data}}, budget, Options{MaxPixels: 1 << 20})
		if len(parts) != 1 {
			t.Fatalf("%d parts for one item", len(parts))
		}
		p := parts[0]
		if len(p.URL) > budget {
			t.Fatalf("URL of %d bytes over a budget of %d", len(p.URL), budget)
		}
		switch p.Kind {
		case Image:
			mime, out := fromURL(t, p.URL)
			if info, err := Probe(out); err != nil || info.MIMEType != mime || mime == GIF {
				t.Fatalf("kept an image the model cannot take: %s %v", mime, err)
			}
		case Text:
			if p.Text == "" || p.URL != "" {
				t.Fatalf("bad note part %+v", p)
			}
		}
	})
}

// FuzzJPEGMarkers runs the marker walks that read a JPEG before it is
// decoded (its scans, its EXIF orientation) over untrusted bytes: they
// must not panic, and the orientation is one of EXIF's eight.
func FuzzJPEGMarkers(f *testing.F) {
	f.Add(progBomb(16, 16, 3))
	f.Add(withOrientation(encodeJPEG(f, noise(8, 8, false)), 6, "II"))
	f.Add([]byte("\xff\xd8\xff\xe1\x00\x10Exif\x00\x00MM\x00\x2a\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if n := jpegScans(data); n < 0 || n > len(data) {
			t.Fatalf("%d scans in %d bytes", n, len(data))
		}
		if o := jpegOrientation(data); o < 1 || o > 8 {
			t.Fatalf("orientation %d", o)
		}
	})
}
