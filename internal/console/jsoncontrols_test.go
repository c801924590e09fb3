package console

import (
	"strings"
	"testing"
)

// Newlines and controls inside the strings of the arguments are named
// markers, as they are in any other text (a tab is ⟦U+0009 CHARACTER
// TABULATION⟧ in both), never an escape a person must know to decode
// (\n, \u001b); a backslash followed by an n (\\n in JSON) stays as
// JSON spells it, so the two read differently; a run of one escape is
// one counted marker; every C0 and C1 control has its own name; a
// newline in a short value (an id, a tool's name, a header) is a
// marker, not a line break.
func TestJSONControlsNamed(t *testing.T) {
	in := `{"cmd":"echo ok\u0000\u001b[2J\r\t done\n\n\nrm -rf ~ \\n \"q\" \b\f\u0001\u007f\u0085\u2028\ud800x"}`
	s := showJSON([]byte(in), 0)
	var page strings.Builder
	for _, l := range s.Lines {
		for _, g := range l.Segs {
			page.WriteString(g.Text)
		}
		page.WriteByte('\n')
	}
	got := page.String()
	for _, w := range []string{"ok⟦U+0000 NULL⟧⟦U+001B ESCAPE⟧[2J⟦U+000D CARRIAGE RETURN⟧⟦U+0009 CHARACTER TABULATION⟧ done⟦3 × U+000A LINE FEED⟧rm -rf ~ \\\\n \\\"q\\\" ⟦U+0008 BACKSPACE⟧⟦U+000C FORM FEED⟧⟦U+0001 START OF HEADING⟧⟦U+007F DELETE⟧⟦U+0085 NEXT LINE⟧⟦U+2028 LINE SEPARATOR⟧⟦U+D800 LONE SURROGATE, not a character⟧x"} {
		if !strings.Contains(got, w) {
			t.Errorf("shown\n%s\nlacks %s", got, w)
		}
	}
	if s.raw() != "{\n  \"cmd\": \"echo ok\\u0000\\u001b[2J\\r\\t done\\n\\n\\nrm -rf ~ \\\\n \\\"q\\\" \\b\\f\\u0001\u007f\u0085\u2028\\ud800x\"\n}" {
		t.Errorf("reads back as %q", s.raw())
	}
	for r := rune(0); r <= 0x9f; r++ {
		if r == 0x20 {
			r = 0x7f
		}
		if m := marker(r); strings.Contains(m, " CONTROL⟧") {
			t.Errorf("U+%04X is not named: %s", r, m)
		}
	}
	for _, v := range []string{"c1\nrm", "tool\n", "a\r\nb"} {
		l := showInline([]byte(v), maxShortShown)
		if len(l.Lines) != 1 || l.raw() != v || !strings.Contains(l.Lines[0].Segs[len(l.Lines[0].Segs)-1-btoi(v != "tool\n")].Text, "LINE FEED") {
			t.Errorf("%q inline: %+v", v, l.Lines)
		}
	}
}
