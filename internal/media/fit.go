package media

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"golang.org/x/sync/semaphore"

	"github.com/agentbull/toolruntime/internal/textclip"
)

// Item is an image or file a tool returned (the fields of tool.Media,
// so that one converts to the other).
type Item struct {
	MIMEType string
	Data     []byte
	Filename string
	Source   string
}

// Kind says what a Part is.
type Kind int

// Kinds of parts.
const (
	// Text is a note standing where an item was left out.
	Text Kind = iota
	// Image is an input_image: URL is its data URL.
	Image
	// File is an input_file: URL is its data URL, Filename its name.
	File
)

// Part is one item of a call's output after fitting.
type Part struct {
	Kind Kind
	// Text is the note of a Text part.
	Text string
	// URL is the data URL of an Image or File part, Filename a File's
	// name.
	URL      string
	Filename string
	// Note is what replaces an Image or File part should it have to go
	// after all: when the outputs of a whole step do not fit one event.
	Note string
}

// DefaultBudget is the media budget of one output (the bytes of its data
// URLs, base64 included): a quarter of NATS's default max payload of
// 1 MiB, so that one output fits an event with room for its text and
// details, and a step.done holds three such outputs whole.
const DefaultBudget = 256 << 10

// DefaultFilename names a PDF that came without a name: the Responses
// API needs one with file_data.
const DefaultFilename = "document.pdf"

// Options tune Fit. The zero value of each field is its default.
type Options struct {
	// MaxPixels bounds the images decoded (DefaultMaxPixels).
	MaxPixels int
	// Slots, when set, bounds the images decoded and scaled at once
	// across every Fit that shares it.
	Slots Slots
}

// Slots bound the images decoded and scaled at once, by their pixels: n
// slots hold together at most MaxPixels, so up to n small images at once
// but one of MaxPixels alone. What a decode holds goes with its pixels
// (up to about 15 bytes each: a progressive colour JPEG's coefficients),
// and a file of a few hundred bytes can declare 25 megapixels, so a
// bound by count alone let n such files hold n times 360 MB. The zero
// Slots bounds nothing.
type Slots struct {
	sem *semaphore.Weighted
	n   int64
}

// NewSlots returns n slots (at least one).
func NewSlots(n int) Slots {
	n = max(n, 1)
	return Slots{sem: semaphore.NewWeighted(int64(n)), n: int64(n)}
}

// take waits for the slots an image of pixels pixels needs (its share of
// maxPixels, at least one, at most all), or for ctx to be done.
func (s Slots) take(ctx context.Context, pixels, maxPixels int64) (func(), error) {
	if s.sem == nil {
		return func() {}, ctx.Err()
	}
	w := s.weight(pixels, maxPixels)
	if err := s.sem.Acquire(ctx, w); err != nil {
		return nil, err
	}
	return func() { s.sem.Release(w) }, nil
}

func (s Slots) weight(pixels, maxPixels int64) int64 {
	if pixels <= 0 || pixels > maxPixels {
		return 1 // refused, or not an image: no pixels are decoded
	}
	return min(max((pixels*s.n+maxPixels-1)/maxPixels, 1), s.n)
}

// stoppedReason is the note's reason for an image left out because Fit's
// context ended first.
const stoppedReason = "its call was stopped before the image was fitted"

// MaxItems bounds the media of one output: the rest are left out with one
// note, so that a server sending thousands of tiny images costs neither
// thousands of decodes nor an output of notes.
const MaxItems = 20

// Fit turns items into parts whose URLs together are at most budget
// bytes. Items are taken smallest first, each given an even share of
// what is left: one that fits its share is kept (an image is decoded
// once, to be sure it is one), an image over it is scaled down to it,
// and anything else is replaced by a note, leaving its share to the
// items after it. Parts come back in the order of items; past MaxItems,
// one note stands for all the rest.
//
// ctx bounds the work: once it is done (the call's turn was aborted), the
// images not yet fitted become notes, and a decode under way stops at its
// next read of the image's bytes.
func Fit(ctx context.Context, items []Item, budget int, opts Options) []Part {
	if opts.MaxPixels <= 0 {
		opts.MaxPixels = DefaultMaxPixels
	}
	if len(items) > MaxItems {
		parts := Fit(ctx, items[:MaxItems], budget, opts)
		return append(parts, Part{Kind: Text, Text: fmt.Sprintf("[left out: %d more images and files, because one output holds at most %d]", len(items)-MaxItems, MaxItems)})
	}
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(items[a].Data) - len(items[b].Data) })
	parts := make([]Part, len(items))
	left := budget
	for k, i := range order {
		share := left / (len(items) - k)
		parts[i] = fitOne(ctx, items[i], share, budget, opts)
		left -= len(parts[i].URL)
	}
	return parts
}

// fitOne fits one item into share bytes of URL; budget is the whole
// output's, for the notes.
func fitOne(ctx context.Context, it Item, share, budget int, opts Options) Part {
	mime := Sniff(it.Data)
	declared := strings.ToLower(strings.TrimSpace(it.MIMEType))
	switch {
	case IsImage(mime):
		return fitImage(ctx, it, mime, share, budget, opts)
	case mime == PDF:
		// The name alone: a path would tell the provider nothing more.
		name := path.Base(it.Filename)
		if it.Filename == "" || name == "/" || name == "." {
			name = DefaultFilename
		}
		if n := DataURLLen(PDF, len(it.Data)); n > share {
			return noteFor(it, PDF, len(it.Data), fmt.Sprintf("it does not fit the %s of media one output may hold", textclip.Size(budget)))
		}
		return Part{Kind: File, URL: DataURL(PDF, it.Data), Filename: name, Note: textclip.StepNote(it.Filename, it.Source, PDF, len(it.Data))}
	case strings.HasPrefix(declared, "image/"):
		return noteFor(it, declared, len(it.Data), "its bytes are not a PNG, JPEG, GIF or WebP image")
	case declared == PDF:
		return noteFor(it, declared, len(it.Data), "its bytes are not a PDF file")
	}
	return noteFor(it, declared, len(it.Data), "the model reads only images (PNG, JPEG, GIF, WebP) and PDF files")
}

func fitImage(ctx context.Context, it Item, mime string, share, budget int, opts Options) Part {
	data := it.Data
	if mime == PNG {
		data = cleanPNG(data)
	}
	var pixels int64
	if info, err := Probe(data); err == nil {
		pixels = int64(info.Width) * int64(info.Height)
	}
	release, err := opts.Slots.take(ctx, pixels, int64(opts.MaxPixels))
	if err != nil {
		return noteFor(it, mime, len(it.Data), stoppedReason)
	}
	defer release()
	img, info, err := decode(ctx, data, opts.MaxPixels)
	switch {
	case ctx.Err() != nil:
		return noteFor(it, mime, len(it.Data), stoppedReason)
	case errors.Is(err, ErrTooManyPixels):
		return noteFor(it, mime, len(it.Data), fmt.Sprintf("at %d×%d pixels it is over the %d-megapixel limit of the images the worker decodes", info.Width, info.Height, opts.MaxPixels/1_000_000))
	case errors.Is(err, ErrTooManyScans):
		return noteFor(it, mime, len(it.Data), fmt.Sprintf("it is a JPEG of more than %d scans, too costly to decode", MaxScans))
	case err != nil:
		return noteFor(it, mime, len(it.Data), "it does not decode as an image ("+textclip.Quote(err.Error())+")")
	}
	// A GIF is sent as a PNG of its first frame: the model takes still
	// images only.
	if mime != GIF && DataURLLen(mime, len(data)) <= share {
		return Part{Kind: Image, URL: DataURL(mime, data), Note: textclip.StepNote(it.Filename, it.Source, mime, len(data))}
	}
	o := 1
	if mime == JPEG {
		o = jpegOrientation(data)
	}
	out, data, err := shrink(ctx, img, share, mime == GIF, o)
	if ctx.Err() != nil {
		return noteFor(it, mime, len(it.Data), stoppedReason)
	}
	if err != nil {
		return noteFor(it, mime, len(it.Data), fmt.Sprintf("even scaled down from %d×%d pixels it does not fit the %s of media one output may hold", info.Width, info.Height, textclip.Size(budget)))
	}
	return Part{Kind: Image, URL: DataURL(out, data), Note: textclip.StepNote(it.Filename, it.Source, out, len(data))}
}

// noteFor is the Text part that stands for it, left out for reason.
func noteFor(it Item, mime string, size int, reason string) Part {
	return Part{Kind: Text, Text: textclip.MediumNote(it.Filename, it.Source, mime, size, reason)}
}
