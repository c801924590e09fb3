package console

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func decode(t *testing.T, b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// plainOK checks that a plain run of a shown line holds nothing a page
// would hide: no hidden character, no byte that is not UTF-8, no run of
// spaceRun spaces after its line's indentation, no trailing space.
func plainOK(t *testing.T, l line) {
	t.Helper()
	for i, g := range l.Segs {
		if g.Mark {
			if g.Raw == "" {
				t.Fatalf("marker %q stands for nothing", g.Text)
			}
			continue
		}
		if !utf8.ValidString(g.Text) {
			t.Fatalf("plain run %q is not UTF-8", g.Text)
		}
		text := g.Text
		if i == 0 {
			text = strings.TrimLeft(text, " ")
			if ind := len(g.Text) - len(text); ind > maxIndent {
				t.Fatalf("plain run %q: indentation of %d", g.Text, ind)
			}
		}
		for _, r := range text {
			if hidden(r) {
				t.Fatalf("plain run %q holds U+%04X, which the page would not show", g.Text, r)
			}
		}
		if strings.Contains(text, strings.Repeat(" ", spaceRun)) {
			t.Fatalf("plain run %q holds a run of spaces", g.Text)
		}
		if i == len(l.Segs)-1 && strings.HasSuffix(text, " ") {
			t.Fatalf("plain run %q ends a line with a space", g.Text)
		}
	}
}

// FuzzFormatArgs: every character of the arguments is on the page, the
// hidden ones as markers (markers read back as what they stand for give
// the same JSON value as the stored arguments), and no plain run holds a
// character a browser would not draw where it stands.
func FuzzFormatArgs(f *testing.F) {
	for _, s := range []string{`{"label":"deploy"}`, `{"note":"\u003cimg src=x onerror=alert(1)\u003e"}`, `{"a":"\\u003c","b":[1,2.5e3,null,true]}`,
		`{"long":"` + strings.Repeat("é", 300) + `"}`, `not json <b>`, `"\ud83d\ude00"`,
		"{\"command\":\"true # \u202eidib-DENWP hcuot ; echo preview\u202c\"}",
		"{\"command\":\"touch report\u00ad.txt fi\u200bnal\u2060.txt\U000E0041\"}",
		`{"command":"ls` + strings.Repeat(" ", 400) + `; rm -rf ~"}`, "a\tb\r\n\x00\x1b[2J\xff", "\u2067x\u2069\ufeff\u180e\ufe0f\u00a0",
		`{"k\u0041":"echo hi\u000a\u0072\u006d -rf ~ \u202e\u005c\u0022\/\ud83d\ude00\ud800"}`, `{"x":"` + strings.Repeat("\u200b\u0430", 50) + `"}`,
		`{"cmd\n":"echo ;\u0338 |\u20d2 \u115f\u3164\uffa0\ufeff x\u2028y\u0085\u0000\n\n\t\\n\\\"\u001b[2J\ud800"}`,
		"{\"z\":\"a\u0300\u0300\u0301\u034f\u20dd\ufe0f e\u0301\u0302 \u0430\u0489\u0489\u0489\"}",
		`{"n":[0.1000000000000000000000001,1e400,-1e-400,12345678901234567890,0.1,-0,1.0E+2,0.000e99999999999999999999]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := showJSON(b, 0)
		if s.Clipped() {
			t.Fatal("clipped without a limit")
		}
		for _, l := range s.Lines {
			plainOK(t, l)
		}
		if !json.Valid(b) {
			if got := s.raw(); got != string(b) {
				t.Fatalf("shown text %q reads back as %q", b, got)
			}
			return
		}
		// Inside its strings no escape stands for a character (a
		// newline, a control, a lone surrogate): each is a marker. A
		// plain run's backslashes are all \\ or \" (outside strings,
		// JSON has none).
		for _, l := range s.Lines {
			for _, g := range l.Segs {
				for i := 0; !g.Mark && i < len(g.Text); i++ {
					if g.Text[i] != '\\' {
						continue
					}
					if i+1 >= len(g.Text) || g.Text[i+1] != '\\' && g.Text[i+1] != '"' {
						t.Fatalf("plain run %q holds an escape of a character (from %q)", g.Text, b)
					}
					i++
				}
			}
		}
		shown := []byte(s.raw())
		if !json.Valid(shown) {
			t.Fatalf("shown %q is not JSON (from %q)", shown, b)
		}
		if !reflect.DeepEqual(decode(t, shown), decode(t, b)) {
			t.Fatalf("shown %q is another value than %q", shown, b)
		}
		// Clipped, it is a prefix of the whole, and says how much is left.
		c := showJSON(b, 64)
		if whole := s.raw(); !strings.HasPrefix(whole, c.raw()) || c.LeftOut+len(c.raw()) != len(whole) {
			t.Fatalf("clipped %q (left out %d) is not a prefix of %q", c.raw(), c.LeftOut, whole)
		}
	})
}

// The attacks of the issue: each hidden character is a named marker.
func TestHiddenCharactersNamed(t *testing.T) {
	for in, want := range map[string]string{
		"true # \u202eidib\u202c":             "⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧",
		"a\u2067b\u2069":                      "⟦U+2067 RIGHT-TO-LEFT ISOLATE⟧",
		"report\u00ad.txt":                    "⟦U+00AD SOFT HYPHEN⟧",
		"fi\u200bnal":                         "⟦U+200B ZERO WIDTH SPACE⟧",
		"a\u2060b":                            "⟦U+2060 WORD JOINER⟧",
		"x\U000E0041":                         "⟦U+E0041 TAG LATIN CAPITAL LETTER A⟧",
		"\ufeffx":                             "⟦U+FEFF ZERO WIDTH NO-BREAK SPACE⟧",
		"a\u180eb":                            "⟦U+180E MONGOLIAN VOWEL SEPARATOR⟧",
		"a\ufe0fb":                            "⟦U+FE0F VARIATION SELECTOR-16⟧",
		"a\u00a0b":                            "⟦U+00A0 NO-BREAK SPACE⟧",
		"a\u200eb\u200f\u061c":                "⟦U+061C ARABIC LETTER MARK⟧",
		"a\x1bb":                              "⟦U+001B ESCAPE⟧",
		"a\u0085b":                            "⟦U+0085 NEXT LINE⟧",
		"ls" + strings.Repeat(" ", 400) + "x": "⟦400 spaces⟧",
		"a\xffb":                              "⟦byte 0xFF, not UTF-8⟧",
	} {
		s := showText([]byte(in), 0)
		var marks []string
		for _, l := range s.Lines {
			for _, g := range l.Segs {
				if g.Mark {
					marks = append(marks, g.Text)
				}
			}
		}
		if !strings.Contains(strings.Join(marks, ""), want) {
			t.Errorf("%q: markers %q, want %s", in, marks, want)
		}
	}
}
