package media

import (
	"image"
	"image/color"
	"image/draw"
	"math/rand/v2"
	"testing"
)

// screen is a w×h picture like a screenshot: flat panels, thin lines and
// small dark marks standing for text.
func screen(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.NRGBA{245, 245, 245, 255}}, image.Point{}, draw.Src)
	r := rand.New(rand.NewPCG(3, 4))
	for range 40 {
		x, y := r.IntN(w-200), r.IntN(h-100)
		c := color.NRGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255}
		draw.Draw(img, image.Rect(x, y, x+r.IntN(200)+20, y+r.IntN(100)+10), &image.Uniform{c}, image.Point{}, draw.Src)
	}
	for range 20000 {
		x, y := r.IntN(w-6), r.IntN(h-2)
		draw.Draw(img, image.Rect(x, y, x+1+r.IntN(5), y+2), &image.Uniform{color.NRGBA{20, 20, 20, 255}}, image.Point{}, draw.Src)
	}
	return img
}

func benchFit(b *testing.B, data []byte) {
	b.SetBytes(int64(len(data)))
	var out int
	for b.Loop() {
		p := Fit(b.Context(), []Item{{Data: data}}, DefaultBudget, Options{})[0]
		if p.Kind != Image {
			b.Fatalf("not an image: %s", p.Text)
		}
		out = len(p.URL)
	}
	b.ReportMetric(float64(out), "url-bytes")
}

// A 1920×1080 screenshot PNG within the default budget: decoded once to
// check it, sent as it is.
func BenchmarkFitScreenshot(b *testing.B) { benchFit(b, encodePNG(b, screen(1920, 1080))) }

// A 3840×2160 screenshot PNG over the default budget: scaled, as JPEG.
func BenchmarkFitScreenshot4K(b *testing.B) { benchFit(b, encodePNG(b, screen(3840, 2160))) }

// A 4000×3000 photo-like JPEG (noise: the worst case for its size).
func BenchmarkFitPhoto(b *testing.B) { benchFit(b, encodeJPEG(b, noise(4000, 3000, false))) }
