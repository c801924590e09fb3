package console

import (
	"strings"
	"testing"
)

// A JSON number a tool reading it as a 64-bit float would run as
// another number (more digits than a float64 holds, past its range) is
// shown whole and named with what it is read as; a number read as
// itself (0.1, 2.5e3, 1.0, -0) has no note, and a number inside a string
// is text, not a number.
func TestInexactNumbersNamed(t *testing.T) {
	in := `{"a":0.1000000000000000000000001,"b":1e400,"c":12345678901234567890,"d":0.1,"e":9007199254740993,` +
		`"f":-0,"g":1e-400,"h":[1,2.5e3,100,1.0,-1.5E-3,9007199254740992],"i":"12345678901234567890","j":-1e400}`
	s := showJSON([]byte(in), 0)
	var notes []string
	var text strings.Builder
	for _, l := range s.Lines {
		for _, g := range l.Segs {
			if g.Note {
				notes = append(notes, g.Text)
			}
			text.WriteString(g.Text)
		}
		text.WriteByte('\n')
	}
	want := []string{
		`"a": 0.1000000000000000000000001⟦not exact as a 64-bit number: read as 0.1⟧`,
		`"b": 1e400⟦not exact as a 64-bit number: read as +Inf⟧`,
		`"c": 12345678901234567890⟦not exact as a 64-bit number: read as 1.2345678901234567e+19⟧`,
		`"e": 9007199254740993⟦not exact as a 64-bit number: read as 9.007199254740992e+15⟧`,
		`"g": 1e-400⟦not exact as a 64-bit number: read as 0⟧`,
		`"j": -1e400⟦not exact as a 64-bit number: read as -Inf⟧`,
	}
	for _, w := range want {
		if !strings.Contains(text.String(), w) {
			t.Errorf("shown %q lacks %q", text.String(), w)
		}
	}
	if len(notes) != len(want) {
		t.Errorf("notes %q, want %d", notes, len(want))
	}
	if got, whole := s.raw(), showJSON([]byte(in), 0).raw(); got != whole || strings.Contains(got, "⟦") {
		t.Errorf("a note stands for something: %q", got)
	}
}
