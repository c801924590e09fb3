package media

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"

	"golang.org/x/image/draw"
	"golang.org/x/image/webp"
)

// DefaultMaxPixels bounds the images the worker decodes (25 megapixels,
// a 6000×4000 photo with room to spare): decoding one holds about four
// bytes per pixel, so this bounds what a small, hostile file can make
// the worker allocate.
const DefaultMaxPixels = 25_000_000

// MaxScans bounds the scans of a JPEG the worker decodes. Each scan of a
// progressive JPEG visits every block of the image, and one made of
// end-of-band runs takes a few bytes: without a bound, a file of tens
// of kilobytes (1000 scans at 25 megapixels) holds a core for many
// seconds. Encoders write
// about ten (libjpeg's progressive script: 10 for colour, 6 for grey),
// so 100 refuses no real image and bounds the worst one to a few times
// the cost of an ordinary decode of its size.
const MaxScans = 100

// minSide is the longest side below which an image is not scaled further:
// smaller than this it would tell the model nothing.
const minSide = 16

// jpegQuality is the quality of re-encoded images: good enough for text
// in a screenshot, about a tenth the bytes of the PNG.
const jpegQuality = 85

var (
	// ErrNotImage is the error of bytes that are not a PNG, JPEG, GIF or
	// WebP image.
	ErrNotImage = errors.New("not a PNG, JPEG, GIF or WebP image")
	// ErrTooManyScans is the error of a JPEG of more than MaxScans
	// scans; it is refused before its pixels are decoded.
	ErrTooManyScans = errors.New("too many scans to decode")
	// ErrTooManyPixels is the error of an image whose declared size is
	// over the pixel limit; it is refused before its pixels are decoded.
	ErrTooManyPixels = errors.New("too many pixels to decode")
	// errNoFit is the error of an image that does not fit its budget
	// even at the smallest size worth sending.
	errNoFit = errors.New("does not fit even scaled down")
)

// Info is what an image's header says: its type and dimensions.
type Info struct {
	MIMEType      string
	Width, Height int
}

// Probe reads an image's type and dimensions from its header, without
// decoding its pixels.
func Probe(data []byte) (Info, error) {
	mime := Sniff(data)
	var cfg image.Config
	var err error
	switch mime {
	case PNG:
		cfg, err = png.DecodeConfig(bytes.NewReader(data))
	case JPEG:
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(data))
	case GIF:
		cfg, err = gif.DecodeConfig(bytes.NewReader(data))
	case WebP:
		cfg, err = webp.DecodeConfig(bytes.NewReader(data))
	default:
		return Info{}, ErrNotImage
	}
	if err != nil {
		return Info{}, fmt.Errorf("%w: %v", ErrNotImage, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Info{}, fmt.Errorf("%w: it is %d×%d pixels", ErrNotImage, cfg.Width, cfg.Height)
	}
	return Info{MIMEType: mime, Width: cfg.Width, Height: cfg.Height}, nil
}

// decode decodes an image whose header says it has at most maxPixels
// pixels. A GIF gives its first frame.
func decode(ctx context.Context, data []byte, maxPixels int) (image.Image, Info, error) {
	info, err := Probe(data)
	if err != nil {
		return nil, info, err
	}
	if int64(info.Width)*int64(info.Height) > int64(maxPixels) {
		return nil, info, fmt.Errorf("%w: %d×%d is over %d", ErrTooManyPixels, info.Width, info.Height, maxPixels)
	}
	if info.MIMEType == JPEG {
		if n := jpegScans(data); n > MaxScans {
			return nil, info, fmt.Errorf("%w: %d scans is over %d", ErrTooManyScans, n, MaxScans)
		}
	}
	img, err := decodePixels(ctx, info.MIMEType, data)
	if err != nil {
		return nil, info, fmt.Errorf("%w: %v", ErrNotImage, err)
	}
	// A decoder that disagrees with its own header: refuse rather than
	// trust either. A GIF's first frame may cover part of its screen.
	b, screen := img.Bounds(), image.Rect(0, 0, info.Width, info.Height)
	if info.MIMEType == GIF && !b.Empty() && b.In(screen) {
		b = screen
	}
	if b.Dx() != info.Width || b.Dy() != info.Height {
		return nil, info, fmt.Errorf("%w: its header says %d×%d, its pixels %d×%d", ErrNotImage, info.Width, info.Height, b.Dx(), b.Dy())
	}
	return img, info, nil
}

// jpegScans counts the start-of-scan markers of a JPEG, walking its
// marker segments and skipping each scan's entropy-coded data (where a
// 0xFF byte is followed by 0x00, or by a restart marker). It reads the
// bytes once and allocates nothing; a malformed file gives a count the
// decoder will refuse anyway.
func jpegScans(data []byte) int {
	n := 0
	for i := 2; i+1 < len(data); {
		if data[i] != 0xff {
			i++
			continue
		}
		m := data[i+1]
		switch {
		case m == 0xd9: // EOI
			return n
		case m == 0xff: // fill byte before a marker
			i++
			continue
		case m == 0x00, m == 0x01, m >= 0xd0 && m <= 0xd8: // no length
			i += 2
			continue
		}
		if i+3 >= len(data) {
			return n
		}
		i += 2 + (int(data[i+2])<<8 | int(data[i+3]))
		if m != 0xda {
			continue
		}
		n++
		for i+1 < len(data) && (data[i] != 0xff || data[i+1] == 0x00 || data[i+1] >= 0xd0 && data[i+1] <= 0xd7) {
			i++
		}
	}
	return n
}

// decodePixels runs the decoder of mime. A decoder that panics on hostile
// bytes (a bug, but in code that reads anything a server sends) is an
// error, not a crashed worker.
func decodePixels(ctx context.Context, mime string, data []byte) (img image.Image, err error) {
	defer func() {
		if r := recover(); r != nil {
			img, err = nil, fmt.Errorf("the decoder failed: %v", r)
		}
	}()
	r := &ctxReader{ctx: ctx, r: bytes.NewReader(data)}
	switch mime {
	case PNG:
		return png.Decode(r)
	case JPEG:
		return jpeg.Decode(r)
	case GIF:
		return gif.Decode(r)
	case WebP:
		return webp.Decode(r)
	}
	return nil, ErrNotImage
}

// readChunk is the most a decoder gets from one read: it reads again at
// least every readChunk bytes, and so sees its context end soon (a
// progressive JPEG's scan may be a few bytes, and cost a pass over every
// block).
const readChunk = 256

// ctxReader reads r in chunks of at most readChunk, until ctx is done.
type ctxReader struct {
	ctx context.Context
	r   *bytes.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) > readChunk {
		p = p[:readChunk]
	}
	return c.r.Read(p)
}

// shrink encodes img so that its data URL is at most maxURL bytes: as
// JPEG when it is opaque, as PNG when it has transparency, scaled down
// as far as needed (never up); as PNG too when asPNG is set (a GIF's
// frame: few colours, which PNG keeps exact and small). The copy is
// turned as EXIF orientation o says (it carries no EXIF of its own). It
// returns the type and the bytes.
func shrink(ctx context.Context, img image.Image, maxURL int, asPNG bool, o int) (string, []byte, error) {
	mime, perPixel := JPEG, 0.35
	if o, ok := img.(interface{ Opaque() bool }); asPNG || ok && !o.Opaque() {
		mime, perPixel = PNG, 2.0
	}
	b := img.Bounds()
	w0, h0 := b.Dx(), b.Dy()
	// A first guess from typical bytes per pixel spares encoding a large
	// image at full size only to learn it is far too big.
	raw := float64(maxURL-DataURLLen(mime, 0)) * 3 / 4
	scale := math.Min(1, math.Sqrt(raw/perPixel/float64(w0*h0)))
	cur := img
	for range 12 {
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
		w, h := max(1, int(float64(w0)*scale)), max(1, int(float64(h0)*scale))
		if w != cur.Bounds().Dx() || h != cur.Bounds().Dy() {
			cur = resize(cur, w, h)
		}
		var buf bytes.Buffer
		var err error
		if mime == JPEG {
			err = jpeg.Encode(&buf, orient(cur, o), &jpeg.Options{Quality: jpegQuality})
		} else {
			err = (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, orient(cur, o))
		}
		if err != nil {
			return "", nil, err
		}
		n := DataURLLen(mime, buf.Len())
		if n <= maxURL {
			return mime, buf.Bytes(), nil
		}
		if max(w, h) <= minSide {
			break
		}
		// Bytes go with the area: scale the sides by the root of what is
		// over, and a little more so the next try is likely the last.
		scale *= math.Sqrt(float64(maxURL)/float64(n)) * 0.9
		if max(float64(w0), float64(h0))*scale < minSide {
			scale = minSide / max(float64(w0), float64(h0))
		}
	}
	return "", nil, errNoFit
}

// resize scales src to w×h with a tent filter stretched over the source
// pixels each output pixel covers, so that text does not alias.
func resize(src image.Image, w, h int) image.Image {
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.BiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	return dst
}

// pngSignature opens every PNG.
const pngSignature = "\x89PNG\r\n\x1a\n"

// cleanPNG drops the ancillary chunks (those whose type starts with a
// lower-case letter: colour profiles, text, EXIF) whose checksum is
// wrong, as browsers and libpng do: such files are common (the MCP
// reference server's own image has a broken iCCP chunk), and Go's
// decoder, like some providers', refuses them whole. Anything else is
// left as it is, for the decoder to judge; data is not modified.
func cleanPNG(data []byte) []byte {
	if !bytes.HasPrefix(data, []byte(pngSignature)) {
		return data
	}
	var out []byte
	for i := len(pngSignature); i+12 <= len(data); {
		n := int64(binary.BigEndian.Uint32(data[i:]))
		end := int64(i) + 12 + n
		if end > int64(len(data)) {
			break
		}
		chunk := data[i:end]
		typ := chunk[4:8]
		ancillary := typ[0]&0x20 != 0
		bad := crc32.ChecksumIEEE(chunk[4:8+n]) != binary.BigEndian.Uint32(chunk[8+n:])
		switch {
		case ancillary && bad && out == nil:
			out = append(make([]byte, 0, len(data)), data[:i]...)
		case ancillary && bad:
		case out != nil:
			out = append(out, chunk...)
		}
		i = int(end)
		if string(typ) == "IEND" {
			break
		}
	}
	if out == nil {
		return data
	}
	return out
}
