package textclip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzHeadTail: a cut is within its budget, is a prefix (suffix) of the
// text and, of valid text, never splits a character nor loses more than
// the bytes of one to the boundary.
func FuzzHeadTail(f *testing.F) {
	for _, s := range []string{"", "plain", "é ü 日本 😀", "\xff\xfe bad", "\xe2\x80"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n % (len(s) + 2)
		h, tl := Head(s, n), Tail(s, n)
		for _, c := range []struct {
			name, cut string
			ok        bool
		}{{"Head", h, strings.HasPrefix(s, h)}, {"Tail", tl, strings.HasSuffix(s, tl)}} {
			if !c.ok || len(c.cut) > max(n, 0) && len(c.cut) != len(s) {
				t.Fatalf("%s(%q, %d) = %q", c.name, s, n, c.cut)
			}
			if utf8.ValidString(s) && n >= 0 && len(c.cut) < min(n, len(s))-utf8.UTFMax {
				t.Fatalf("%s(%q, %d) = %q: lost more than one character", c.name, s, n, c.cut)
			}
			if utf8.ValidString(s) && !utf8.ValidString(c.cut) {
				t.Fatalf("%s(%q, %d) = %q splits a character", c.name, s, n, c.cut)
			}
		}
	})
}

func TestByteCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 1: "1 byte", 812: "812 bytes", 16 << 10: "16.0 KiB", 50_000_000: "47.7 MiB"} {
		if got := ByteCount(n); got != want {
			t.Errorf("ByteCount(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCutEllipsisRunes(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Cut("short", 5, "…"), "short"},
		{Cut("abcdef", 5, "…"), "ab…"},
		{Cut("日本語です", 10, "…"), "日本…"},
		{Cut("message.", 7, "…."), "mes…."},
		{Cut("abc", 2, "[cut]"), "[cut]"},
		{Ellipsis("short", 5), "short"},
		{Ellipsis("abcdef", 5), "abcde…"},
		{Ellipsis("日本語", 4), "日…"},
		{Runes("日本語です", 5), "日本語です"},
		{Runes("日本語です", 3), "日本…"},
		{Runes("a\xffbc", 3), "a\ufffd…"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// Runes is the clip of titles and labels (once tools.Clip, and a copy in
// web and in computer).
func TestRunes(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"a longer title", 8, "a longe…"},
		{"日本語のタイトル", 4, "日本語…"},
	} {
		if got := Runes(c.s, c.n); got != c.want {
			t.Errorf("Runes(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// A clipped message ends between characters (a chaos report's error
// cut inside one, and the report's line was not valid UTF-8).
func TestEllipsisBetweenCharacters(t *testing.T) {
	for n := 1; n < 12; n++ {
		got := Ellipsis(strings.Repeat("é", 5)+"x", n)
		if !utf8.ValidString(got) || len(got) > n+len("…") {
			t.Errorf("clip at %d: %q", n, got)
		}
	}
	if got := Ellipsis("short", 300); got != "short" {
		t.Errorf("clip of a short message: %q", got)
	}
}

func TestNoteClipsWhatItQuotes(t *testing.T) {
	n := MediumNote(strings.Repeat("f", 5000), strings.Repeat("s", 5000), "application/pdf", 10, "r")
	if len(n) > 800 {
		t.Errorf("a note quoting a long source is %d bytes", len(n))
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int]string{0: "0 bytes", 1023: "1023 bytes", 1024: "1 KiB", 12 << 10: "12 KiB", 1<<20 + 1<<19: "1.5 MiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// The wording of a left-out medium, for each kind of medium.
func TestMediumNote(t *testing.T) {
	for _, c := range []struct {
		filename, source, mime string
		want                   string
	}{
		{"", "", "image/png", "[left out: an image/png image (12 KiB), because r]"},
		{"shots/a.png", "shots/a.png", "image/webp", "[left out: the image/webp image a.png (12 KiB) from shots/a.png, because r]"},
		{"", "", "application/pdf", "[left out: a PDF file (12 KiB), because r]"},
		{"docs/r.pdf", "", "application/pdf", "[left out: the PDF file r.pdf (12 KiB), because r]"},
		{"", "", "audio/wav", "[left out: audio/wav content (12 KiB), because r]"},
		{"s.wav", "", "audio/wav", "[left out: the audio/wav file s.wav (12 KiB), because r]"},
		{"", "", "", "[left out: content of unknown type (12 KiB), because r]"},
	} {
		if got := MediumNote(c.filename, c.source, c.mime, 12<<10, "r"); got != c.want {
			t.Errorf("MediumNote(%q, %q, %q) = %q, want %q", c.filename, c.source, c.mime, got, c.want)
		}
	}
	if got := StepNote("", "", "image/jpeg", 1<<20+1<<19); got != "[left out: an image/jpeg image (1.5 MiB), because the step's outputs were over the size limit of one event]" {
		t.Errorf("StepNote = %q", got)
	}
}
