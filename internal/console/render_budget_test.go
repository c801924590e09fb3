package console

import (
	"fmt"
	"strings"
	"testing"
)

// Every character of the round-five candidates that a shell reads as
// part of a word, or that a browser draws as nothing, elsewhere, or as
// another character, is a marker that names it; none reaches the page
// as plain text.
func TestEveryCandidateNamed(t *testing.T) {
	var cands []rune
	cands = append(cands, 0x00A0, 0x1680, 0x202F, 0x205F, 0x3000, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x180E, 0x2800,
		0x034F, 0x2028, 0x2029, 0x0085, '\r', '\b', 0x1b, 0x7f, 0, 0x200E, 0x200F, 0x061C, 0xFFF9, 0xFFFA, 0xFFFB, 0xFFFC,
		0xFF52, 0x0430, 0x03BF, 0x0585, 0x0301, 0xE0001, 0xE007F, 0x00AD, 0x2061, 0x2064, 0x17B4, 0x17B5, 0x1D173, 0x1D17A)
	for r := rune(0x2000); r <= 0x200A; r++ {
		cands = append(cands, r)
	}
	for r := rune(0x206A); r <= 0x206F; r++ {
		cands = append(cands, r)
	}
	for r := rune(0xFE00); r <= 0xFE0F; r++ {
		cands = append(cands, r)
	}
	for r := rune(0xE0100); r <= 0xE01EF; r += 0x17 {
		cands = append(cands, r)
	}
	for _, r := range cands {
		s := showText([]byte("a"+string(r)+"b"), 0)
		if len(s.Lines) != 1 {
			t.Errorf("U+%04X splits the line", r)
			continue
		}
		var plain, marks string
		for _, g := range s.Lines[0].Segs {
			if g.Mark {
				marks += g.Text
			} else {
				plain += g.Text
			}
		}
		if plain != "ab" || !strings.HasPrefix(marks, fmt.Sprintf("⟦U+%04X ", r)) {
			t.Errorf("U+%04X: plain %q, markers %q", r, plain, marks)
		}
	}
}

// A run of one character is one counted marker, which reads back as
// the run.
func TestRunsCounted(t *testing.T) {
	in := "x" + strings.Repeat("\u200b", 150_000) + "y" + strings.Repeat("\u0430", 3) + "z\u200b\u200cw"
	s := showText([]byte(in), 0)
	if s.raw() != in {
		t.Fatal("the shown value does not read back")
	}
	var marks []string
	for _, g := range s.Lines[0].Segs {
		if g.Mark {
			marks = append(marks, g.Text)
		}
	}
	want := []string{"⟦150000 × U+200B ZERO WIDTH SPACE⟧", "⟦3 × U+0430 CYRILLIC SMALL LETTER A а⟧", "⟦U+200B ZERO WIDTH SPACE⟧", "⟦U+200C ZERO WIDTH NON-JOINER⟧"}
	if strings.Join(marks, "|") != strings.Join(want, "|") {
		t.Errorf("markers %q, want %q", marks, want)
	}
}

// The limit is on what the page weighs: a value of characters that are
// each a marker (no two alike, so no run) is clipped at the limit's
// weight of page, not at the limit's bytes of value, and the clipped
// part is a prefix of the value with the rest counted.
func TestLimitIsPageWeight(t *testing.T) {
	var b strings.Builder
	for i := range 40_000 {
		b.WriteRune(rune(0x4E00 + i%2000)) // CJK ideographs, each named
		b.WriteString(string(rune(0x200B + i%2)))
	}
	in := b.String()
	s := showText([]byte(in), 64<<10)
	page := 0
	for _, l := range s.Lines {
		page += lineWeight
		for _, g := range l.Segs {
			page += len(g.Text) + markWeight
		}
	}
	if page > 64<<10 || s.Cost != page {
		t.Errorf("a 64 KiB limit showed %d bytes of page (cost %d)", page, s.Cost)
	}
	if !strings.HasPrefix(in, s.raw()) || s.LeftOut+len(s.raw()) != len(in) || s.LeftOut == 0 {
		t.Errorf("clipped: %d shown, %d left out, of %d", len(s.raw()), s.LeftOut, len(in))
	}
	// ASCII weighs its bytes (its escapes more).
	if a := showText([]byte(strings.Repeat("a", 100)), 50); len(a.raw()) != 50-lineWeight {
		t.Errorf("ASCII: %d bytes shown under a limit of 50", len(a.raw()))
	}
	if q := showText([]byte(strings.Repeat(`"`, 100)), 74); len(q.raw()) != 10 {
		t.Errorf("quotes: %d shown under a limit of 74", len(q.raw()))
	}
}

// Escapes inside strings are written as the characters they stand for;
// those that must stay take their short form; keys too; the shown text
// is the same JSON value.
func TestUnescapeStrings(t *testing.T) {
	for in, want := range map[string]string{
		`{"k\u0041":"\u0072m\u000a\u0009\u001b\u005c\u0022\/\ud83d\ude00\ud800x"}`: `{"kA":"rm\n\t\u001b\\\"/😀\ud800x"}`,
		`["\\u0041", "a\\\"b"]`: `["\\u0041", "a\\\"b"]`,
		`"\u003c\u003e\u0026"`:  `"<>&"`,
	} {
		if got := unescapeStrings([]byte(in)); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
