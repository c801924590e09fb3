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
