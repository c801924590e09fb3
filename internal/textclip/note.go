package textclip

import (
	"fmt"
	"path"
	"strings"
)

// maxQuote bounds text quoted into a medium's note (a decoder's error, a
// source a server named, a file name): Ellipsis.
const maxQuote = 300

// MediumNote is the text that says a medium (an image, a file) was left
// out of an output: what it was (its file name and type), its size,
// where it is (source, when known), and why. It is the only wording of
// left-out media, so that a model (and a test) meets one form: the
// media fitting writes it when a medium does not fit an output, the
// event fitting when an output does not fit its event.
func MediumNote(filename, source, mime string, size int, reason string) string {
	var b strings.Builder
	b.WriteString("[left out: ")
	b.WriteString(describe(filename, mime))
	fmt.Fprintf(&b, " (%s)", Size(size))
	if source != "" {
		b.WriteString(" from ")
		b.WriteString(Ellipsis(source, maxQuote))
	}
	b.WriteString(", because ")
	b.WriteString(reason)
	b.WriteString("]")
	return b.String()
}

// StepNote is the note of a medium that was fitted but left out later,
// because the outputs of its step (in step.done, or its own call.output)
// were over the size limit of one event.
func StepNote(filename, source, mime string, size int) string {
	return MediumNote(filename, source, mime, size, "the step's outputs were over the size limit of one event")
}

// Quote bounds a text quoted into a note's reason (a decoder's error,
// for one) as MediumNote bounds the source and the file name it quotes.
func Quote(s string) string { return Ellipsis(s, maxQuote) }

// describe names a medium for a note: "an image/png image", "the
// application/pdf file report.pdf", "audio/wav content".
func describe(filename, mime string) string {
	if mime == "" {
		mime = "content of unknown type"
	}
	name := filename
	if name != "" {
		name = Ellipsis(path.Base(name), maxQuote)
	}
	switch {
	case strings.HasPrefix(mime, "image/"):
		if name != "" {
			return "the " + mime + " image " + name
		}
		return "an " + mime + " image"
	case mime == "application/pdf":
		if name != "" {
			return "the PDF file " + name
		}
		return "a PDF file"
	case strings.Contains(mime, "/"):
		if name != "" {
			return "the " + mime + " file " + name
		}
		return mime + " content"
	}
	return mime
}

// Size writes a byte count as a note reads it: "512 bytes", "12 KiB",
// "3.4 MiB" (whole KiB; ByteCount keeps a decimal and says "1 byte").
func Size(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%d KiB", (n+1<<9)>>10)
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}
