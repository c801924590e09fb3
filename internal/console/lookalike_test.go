package console

import (
	"strings"
	"testing"
)

// Look-alike letters and the characters that change how others look
// are named on the page: a Cyrillic а in a path, fullwidth letters, a
// precomposed é beside e and a combining accent, stacked combining
// marks, Hangul fillers, the Mongolian vowel separator, a BOM, the line
// and paragraph separators, NEL, and bytes that are not UTF-8 (a lone
// surrogate's encoding).
func TestLookalikesNamed(t *testing.T) {
	for in, want := range map[string][]string{
		"rm -rf /tmp/\u0430":              {"⟦U+0430 CYRILLIC SMALL LETTER A а⟧"},
		"\uff52\uff4d -rf /":              {"⟦U+FF52 FULLWIDTH LATIN SMALL LETTER R ｒ⟧", "⟦U+FF4D FULLWIDTH LATIN SMALL LETTER M ｍ⟧"},
		"caf\u00e9":                       {"⟦U+00E9 LATIN SMALL LETTER E WITH ACUTE é⟧"},
		"cafe\u0301":                      {"⟦U+0301 COMBINING ACUTE ACCENT⟧"},
		"x\u0336\u0336\u0336\u0336":       {"⟦4 combining marks on one character: 4 × U+0336 COMBINING LONG STROKE OVERLAY⟧"},
		"e\u0301\u0302":                   {"⟦U+0301 COMBINING ACUTE ACCENT⟧⟦U+0302 COMBINING CIRCUMFLEX ACCENT⟧"},
		"a\u0300\u0300\u0301\u034f\u20dd": {"⟦5 combining marks on one character: 2 × U+0300 COMBINING GRAVE ACCENT; U+0301 COMBINING ACUTE ACCENT; U+034F COMBINING GRAPHEME JOINER; U+20DD COMBINING ENCLOSING CIRCLE⟧"},
		"a\u115fb\u3164c":                 {"⟦U+115F HANGUL CHOSEONG FILLER⟧", "⟦U+3164 HANGUL FILLER⟧"},
		"a\u180eb\ufeffc":                 {"⟦U+180E MONGOLIAN VOWEL SEPARATOR⟧", "⟦U+FEFF ZERO WIDTH NO-BREAK SPACE⟧"},
		"a\u2028b\u2029c\u0085d":          {"⟦U+2028 LINE SEPARATOR⟧", "⟦U+2029 PARAGRAPH SEPARATOR⟧", "⟦U+0085 NEXT LINE⟧"},
		"a\xed\xa0\x80b":                  {"⟦byte 0xED, not UTF-8⟧⟦byte 0xA0, not UTF-8⟧⟦byte 0x80, not UTF-8⟧"},
		"a\u05d0/../b":                    {"⟦U+05D0 HEBREW LETTER ALEF⟧"},
		"\u01c3 \u2044 \u2215":            {"⟦U+01C3 LATIN LETTER RETROFLEX CLICK ǃ⟧", "⟦U+2044 FRACTION SLASH ⁄⟧", "⟦U+2215 DIVISION SLASH ∕⟧"},
		"\U0001d42b\U0001d426":            {"⟦U+1D42B MATHEMATICAL BOLD SMALL R 𝐫⟧"},
		"a\tb":                            {"⟦U+0009 CHARACTER TABULATION⟧"},
		"\u27e6U+0020 SPACE\u27e7":        {"⟦U+27E6 MATHEMATICAL LEFT WHITE SQUARE BRACKET⟧"},
	} {
		s := showText([]byte(in), 0)
		var marks strings.Builder
		for _, l := range s.Lines {
			for _, g := range l.Segs {
				if g.Mark {
					marks.WriteString(g.Text)
				} else if strings.ContainsFunc(g.Text, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
					t.Errorf("%q: drawn as it is: %q", in, g.Text)
				}
			}
		}
		for _, w := range want {
			if !strings.Contains(marks.String(), w) {
				t.Errorf("%q: markers %q, want %s", in, marks.String(), w)
			}
		}
		if s.raw() != in {
			t.Errorf("%q reads back as %q", in, s.raw())
		}
	}
}

// A value whose letters are of two scripts is flagged on the call.
func TestMixedScriptsFlagged(t *testing.T) {
	if n := scriptNote([]byte(`{"command":"rm -rf /tmp/` + "\u0430" + `"}`)); !strings.Contains(n, "Cyrillic, Latin") || !strings.HasPrefix(n, "1 character") {
		t.Errorf("note %q", n)
	}
	if n := scriptNote([]byte(`{"command":"ls"}`)); n != "" {
		t.Errorf("an ASCII value has a note: %q", n)
	}
	if n := scriptNote([]byte(`{"command":"caf` + "\u00e9" + `"}`)); strings.Contains(n, "several") {
		t.Errorf("one script flagged as several: %q", n)
	}
}
