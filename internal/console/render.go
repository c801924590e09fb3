package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/unicode/bidi"
	"golang.org/x/text/unicode/runenames"
)

// A value a person approves is shown character for character: anything
// a browser would not draw, or would draw elsewhere than where it is, is
// replaced on the page by a visible marker that names it
// (⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧). The marker is the only way such a
// character reaches the page; what runs is the value, not the page.

// seg is a run of one line: text drawn as it is, or one marker standing
// for Raw.
type seg struct {
	Text string
	Mark bool
	// Raw is what a marker stands for (the character, the bytes, the
	// run of spaces); empty for plain text.
	Raw string
	// Look marks a drawn character outside printable ASCII (a marker
	// that names it and shows its glyph).
	Look bool
	// Note is a remark on the text before it, drawn as a marker but
	// standing for nothing (a JSON number a 64-bit float reads as
	// another number).
	Note bool
}

// line is one shown line of a value.
type line struct {
	Segs []seg
}

// spaceRun is the length from which a run of spaces inside a line is
// shown as a counted marker, so that a tail pushed away by blank space
// is next to what precedes it.
const spaceRun = 4

// maxShortShown clips a short string (an id, a reason, a label).
const maxShortShown = 4096

// maxIndent is the deepest indentation shown as it is.
const maxIndent = 64

// hidden reports whether r is drawn as nothing, drawn elsewhere, or
// looks like another character: controls (C0, DEL, C1), bidirectional
// formatting, format characters (Cf: zero-width, soft hyphen, tags, word
// joiners, BOM), the other default-ignorable ones (variation selectors,
// Hangul fillers, Mongolian free variation selectors, combining grapheme
// joiner), spaces other than U+0020, line and paragraph separators,
// private use, noncharacters and unassigned code points.
func hidden(r rune) bool {
	switch {
	case r == ' ':
		return false
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r < 0x7f:
		return false
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r),
		unicode.Is(unicode.Variation_Selector, r), unicode.Is(unicode.Zs, r), unicode.Is(unicode.Zl, r),
		unicode.Is(unicode.Zp, r), unicode.Is(unicode.Co, r), unicode.Is(unicode.Noncharacter_Code_Point, r),
		unicode.Is(unicode.Bidi_Control, r), unicode.Is(unicode.Join_Control, r):
		return true
	case r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0, r == 0x2800: // fillers and the blank braille pattern
		return true
	case !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs):
		return true // unassigned (or a surrogate, which valid UTF-8 never holds)
	}
	return false
}

// marker names r: its code point and its Unicode name.
func marker(r rune) string {
	name := runenames.Name(r)
	switch {
	case r < 0x20 || r >= 0x7f && r <= 0x9f:
		name = controlNames[r]
		if name == "" {
			name = "CONTROL"
		}
	case name == "" || strings.HasPrefix(name, "<"):
		switch {
		case unicode.Is(unicode.Co, r):
			name = "PRIVATE USE"
		case unicode.Is(unicode.Noncharacter_Code_Point, r):
			name = "NONCHARACTER"
		default:
			name = "UNASSIGNED"
		}
	}
	return fmt.Sprintf("⟦U+%04X %s⟧", r, name)
}

// lookalike names a drawn character outside printable ASCII, with its
// glyph when the glyph can be drawn alone: not a combining mark (it
// would stack on the marker), not a right-to-left letter (it would
// reorder its neighbours), not the marker's own brackets.
func lookalike(r rune) string {
	name := runenames.Name(r)
	if name == "" || strings.HasPrefix(name, "<") {
		name = "UNNAMED"
	}
	glyph := ""
	if !unicode.In(r, unicode.M) && r != '⟦' && r != '⟧' && !rtl(r) {
		glyph = " " + string(r)
	}
	return fmt.Sprintf("⟦U+%04X %s%s⟧", r, name, glyph)
}

func rtl(r rune) bool {
	p, _ := bidi.LookupRune(r)
	switch p.Class() {
	case bidi.R, bidi.AL, bidi.RLE, bidi.RLO, bidi.RLI, bidi.AN:
		return true
	}
	return false
}

// scriptsOf counts the characters outside printable ASCII of a value and
// names the scripts of its letters (Latin for ASCII letters): letters of
// several scripts in one value are how a look-alike hides (а for a).
func scriptsOf(b []byte) (n int, scripts []string) {
	seen := map[string]bool{}
	for _, r := range string(b) {
		if r > 0x7e || r < 0x20 && r != '\n' {
			n++
		}
		if !unicode.IsLetter(r) {
			continue
		}
		name := "Latin"
		if r > 0x7e {
			name = scriptName(r)
		}
		if !seen[name] {
			seen[name] = true
			scripts = append(scripts, name)
		}
	}
	sort.Strings(scripts)
	return n, scripts
}

func scriptName(r rune) string {
	for _, name := range scriptOrder {
		if unicode.Is(unicode.Scripts[name], r) {
			return name
		}
	}
	return "Unknown"
}

// scriptOrder is unicode.Scripts' names, the common ones first.
var scriptOrder = func() []string {
	first := []string{"Latin", "Cyrillic", "Greek", "Armenian", "Han", "Hiragana", "Katakana", "Hangul", "Arabic", "Hebrew"}
	out := append([]string(nil), first...)
	var rest []string
	for name := range unicode.Scripts {
		if !slices.Contains(first, name) {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}()

// controlNames are the C0 and C1 controls' names (their Unicode name
// aliases: runenames has none), every one of them, so that no control
// is shown as an unnamed "CONTROL".
var controlNames = map[rune]string{
	0x00: "NULL",
	0x01: "START OF HEADING",
	0x02: "START OF TEXT",
	0x03: "END OF TEXT",
	0x04: "END OF TRANSMISSION",
	0x05: "ENQUIRY",
	0x06: "ACKNOWLEDGE",
	0x07: "BELL",
	0x08: "BACKSPACE",
	0x09: "CHARACTER TABULATION",
	0x0A: "LINE FEED",
	0x0B: "LINE TABULATION",
	0x0C: "FORM FEED",
	0x0D: "CARRIAGE RETURN",
	0x0E: "SHIFT OUT",
	0x0F: "SHIFT IN",
	0x10: "DATA LINK ESCAPE",
	0x11: "DEVICE CONTROL ONE",
	0x12: "DEVICE CONTROL TWO",
	0x13: "DEVICE CONTROL THREE",
	0x14: "DEVICE CONTROL FOUR",
	0x15: "NEGATIVE ACKNOWLEDGE",
	0x16: "SYNCHRONOUS IDLE",
	0x17: "END OF TRANSMISSION BLOCK",
	0x18: "CANCEL",
	0x19: "END OF MEDIUM",
	0x1A: "SUBSTITUTE",
	0x1B: "ESCAPE",
	0x1C: "INFORMATION SEPARATOR FOUR",
	0x1D: "INFORMATION SEPARATOR THREE",
	0x1E: "INFORMATION SEPARATOR TWO",
	0x1F: "INFORMATION SEPARATOR ONE",
	0x7F: "DELETE",
	0x80: "PADDING CHARACTER",
	0x81: "HIGH OCTET PRESET",
	0x82: "BREAK PERMITTED HERE",
	0x83: "NO BREAK HERE",
	0x84: "INDEX",
	0x85: "NEXT LINE",
	0x86: "START OF SELECTED AREA",
	0x87: "END OF SELECTED AREA",
	0x88: "CHARACTER TABULATION SET",
	0x89: "CHARACTER TABULATION WITH JUSTIFICATION",
	0x8A: "LINE TABULATION SET",
	0x8B: "PARTIAL LINE FORWARD",
	0x8C: "PARTIAL LINE BACKWARD",
	0x8D: "REVERSE LINE FEED",
	0x8E: "SINGLE SHIFT TWO",
	0x8F: "SINGLE SHIFT THREE",
	0x90: "DEVICE CONTROL STRING",
	0x91: "PRIVATE USE ONE",
	0x92: "PRIVATE USE TWO",
	0x93: "SET TRANSMIT STATE",
	0x94: "CANCEL CHARACTER",
	0x95: "MESSAGE WAITING",
	0x96: "START OF GUARDED AREA",
	0x97: "END OF GUARDED AREA",
	0x98: "START OF STRING",
	0x99: "SINGLE GRAPHIC CHARACTER INTRODUCER",
	0x9A: "SINGLE CHARACTER INTRODUCER",
	0x9B: "CONTROL SEQUENCE INTRODUCER",
	0x9C: "STRING TERMINATOR",
	0x9D: "OPERATING SYSTEM COMMAND",
	0x9E: "PRIVACY MESSAGE",
	0x9F: "APPLICATION PROGRAM COMMAND",
}

// visible splits one line of text into plain runs and markers: every
// hidden character, every byte that is not UTF-8, and every run of
// spaceRun or more spaces after the line's indentation.
func visible(s string) []seg { return visibleIn(s, false) }

// visibleJSON is visible for one line of JSON as showJSON spells it:
// inside its strings, an escape of a character (a control, \n, \t, a
// lone surrogate) is that character's marker too, so that a newline is
// ⟦U+000A LINE FEED⟧ in the arguments as in any other text, never a \n
// a person must know to read as one (and tell from \\n, a backslash and
// an n, which stays as JSON spells it).
func visibleJSON(s string) []seg { return visibleIn(s, true) }

// jsonEscape reads the escape at the start of s (s[0] is a backslash)
// that stands for a character the page names: a control (\b \f \n
// \r \t \u00XX) or a lone surrogate (\uD800). n is 0 for the escapes
// that stay as they are (\" \\ \/) and for what is not an escape.
func jsonEscape(s string) (r rune, n int) {
	if len(s) < 2 {
		return 0, 0
	}
	switch s[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		if r, k := hex4([]byte(s[2:min(len(s), 6)])); k == 4 {
			return r, 6
		}
	}
	return 0, 0
}

// escapeRun is the counted marker of the run of one JSON escape (of
// size bytes, meaning r) that starts at s[i], and how many times it
// repeats there.
func escapeRun(s string, i, size int, r rune) (text string, look bool, n int) {
	n = 1
	for i+(n+1)*size <= len(s) && s[i+n*size:i+(n+1)*size] == s[i:i+size] {
		n++
	}
	text, look = escapeMarker(r)
	if n > 1 {
		text = fmt.Sprintf("⟦%d × %s", n, strings.TrimPrefix(text, "⟦"))
	}
	return text, look, n
}

// escapeMarker names the character a JSON escape stands for.
func escapeMarker(r rune) (text string, look bool) {
	switch {
	case utf16.IsSurrogate(r):
		return fmt.Sprintf("⟦U+%04X LONE SURROGATE, not a character⟧", r), false
	case hidden(r):
		return marker(r), false
	case r > 0x7e:
		return lookalike(r), true
	}
	return fmt.Sprintf("⟦U+%04X %s⟧", r, runenames.Name(r)), false
}

func visibleIn(s string, isJSON bool) []seg { return visibleUpTo(s, isJSON, 0) }

// visibleUpTo is visibleIn that stops once the segments it made weigh
// more than budget (budget > 0): fitLines, showing them within a limit
// of at most budget, never reaches past those, so it shows them as it
// shows the whole line, and a line of a megabyte of markers costs what
// is shown of it, not a marker for each of its characters.
func visibleUpTo(s string, isJSON bool, budget int) []seg {
	var out []seg
	var plain strings.Builder
	w := 0 // what out weighs
	add := func(g seg) {
		out = append(out, g)
		w += g.weight()
	}
	flush := func() {
		if plain.Len() > 0 {
			add(seg{Text: plain.String()})
			plain.Reset()
		}
	}
	indent := len(s) - len(strings.TrimLeft(s, " "))
	if indent > maxIndent {
		indent = 0 // not an indentation json.Indent writes: a run to count
	}
	plain.WriteString(s[:indent])
	inString := false // inside a JSON string (isJSON)
	for i := indent; i < len(s); {
		if budget > 0 && w+plain.Len() > budget { // plain text weighs at least its bytes
			break
		}
		if isJSON && s[i] == '"' {
			inString = !inString
		}
		if isJSON && inString && s[i] == '\\' {
			r, size := jsonEscape(s[i:])
			if size == 0 {
				// \" \\ \/ stay as JSON spells them (a quote or a
				// backslash is drawn as itself, and the escape is part
				// of the string's syntax, not of its value).
				plain.WriteString(s[i:min(len(s), i+2)])
				i += 2
				continue
			}
			// A run of one escape is one counted marker, as a run of
			// one hidden character is.
			flush()
			text, look, n := escapeRun(s, i, size, r)
			add(seg{Text: text, Mark: true, Look: look, Raw: s[i : i+n*size]})
			i += n * size
			continue
		}
		if isJSON && !inString && (s[i] == '-' || s[i] >= '0' && s[i] <= '9') {
			j := i + 1
			for j < len(s) && strings.IndexByte("0123456789+-.eE", s[j]) >= 0 {
				j++
			}
			plain.WriteString(s[i:j])
			if note := inexact(s[i:j]); note != "" {
				flush()
				add(seg{Text: note, Note: true})
			}
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			flush()
			add(seg{Text: fmt.Sprintf("⟦byte 0x%02X, not UTF-8⟧", s[i]), Mark: true, Raw: s[i : i+1]})
		case r == ' ':
			n := 0
			for i+n < len(s) && s[i+n] == ' ' {
				n++
			}
			if n >= spaceRun || i+n == len(s) {
				flush()
				add(seg{Text: fmt.Sprintf("⟦%d space%s⟧", n, plural(n)), Mark: true, Raw: s[i : i+n]})
			} else {
				plain.WriteString(s[i : i+n])
			}
			i += n
			continue
		case unicode.In(r, unicode.M) && stackLen(s[i:]) > 0:
			// A stack of combining marks on one character is one
			// marker that counts and names them: drawn, it would climb
			// far above and below its line; named one by one, a person
			// could not tell how many sit on the character.
			n := stackLen(s[i:])
			flush()
			add(seg{Text: stackMarker(s[i : i+n]), Mark: true, Look: true, Raw: s[i : i+n]})
			i += n
			continue
		case hidden(r), r > 0x7e:
			// A hidden character is named; a drawn one outside printable
			// ASCII may look like another (a Cyrillic а, a fullwidth ｒ, a
			// precomposed é beside e and a combining accent): named, its
			// glyph beside the name where drawing it alone cannot move or
			// stack on its neighbours. A run of one character is one
			// counted marker, so that a value of 150,000 zero-width
			// spaces weighs one marker on the page, not 150,000.
			flush()
			n := 1
			for i+(n+1)*size <= len(s) && s[i+n*size:i+(n+1)*size] == s[i:i+size] {
				n++
			}
			text, look := marker(r), false
			if !hidden(r) {
				text, look = lookalike(r), true
			}
			if n > 1 {
				text = fmt.Sprintf("⟦%d × %s", n, strings.TrimPrefix(text, "⟦"))
			}
			add(seg{Text: text, Mark: true, Look: look, Raw: s[i : i+n*size]})
			i += n * size
			continue
		default:
			plain.WriteString(s[i : i+size])
		}
		i += size
	}
	flush()
	return out
}

// inexact names what a JSON number is read as by a tool that decodes
// it as a 64-bit float (most do: JavaScript, Python's json, Go's
// float64) when that is another number: 12345678901234567890 is read
// as 1.2345678901234567e+19, 1e400 as +Inf, and the page shows the
// number whole, so the person would approve a number that does not run.
// 0.1 is read as 0.1 (the float nearest it, whose shortest spelling is
// the number itself). "" when the number is read as itself, or s is not
// a number.
func inexact(s string) string {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return ""
	}
	if err == nil {
		n1, d1, e1, ok1 := decimal(s)
		n2, d2, e2, ok2 := decimal(strconv.FormatFloat(f, 'e', -1, 64))
		if ok1 && ok2 && n1 == n2 && d1 == d2 && e1 == e2 {
			return ""
		}
	}
	return "⟦not exact as a 64-bit number: read as " + strconv.FormatFloat(f, 'g', -1, 64) + "⟧"
}

// decimal spells a decimal number as its sign, its significant digits
// and the exponent of 0.digits × 10^exp, in time linear in its length
// (no big number is built from a number an agent sent).
func decimal(s string) (neg bool, digits string, exp int, ok bool) {
	neg = strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if k := strings.IndexAny(s, "eE"); k >= 0 {
		e, err := strconv.Atoi(s[k+1:])
		if err != nil {
			return false, "", 0, false
		}
		exp, s = e, s[:k]
	}
	whole, frac, _ := strings.Cut(s, ".")
	digits = whole + frac
	exp += len(whole)
	for len(digits) > 0 && digits[0] == '0' {
		digits, exp = digits[1:], exp-1
	}
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		return false, "", 0, true // zero, of either sign
	}
	return neg, digits, exp, true
}

// maxStack is the most combining marks on one character named one
// marker each; a longer stack is one marker that counts them.
const maxStack = 2

// stackLen is the length in bytes of the run of combining marks that s
// starts with when it holds more than maxStack marks, else 0.
func stackLen(s string) int {
	count, end := 0, 0
	for end < len(s) {
		r, size := utf8.DecodeRuneInString(s[end:])
		if r == utf8.RuneError && size <= 1 || !unicode.In(r, unicode.M) {
			break
		}
		count++
		end += size
	}
	if count <= maxStack {
		return 0
	}
	return end
}

// stackMarker names a stack of combining marks: how many, then each
// (a run of one mark counted), none drawn.
func stackMarker(s string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "⟦%d combining marks on one character:", utf8.RuneCountInString(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n := 1
		for i+(n+1)*size <= len(s) && s[i+n*size:i+(n+1)*size] == s[i:i+size] {
			n++
		}
		name := marker(r)
		if !hidden(r) {
			name = lookalike(r) // no glyph: a combining mark
		}
		name = strings.TrimSuffix(strings.TrimPrefix(name, "⟦"), "⟧")
		if i > 0 {
			b.WriteByte(';')
		}
		if n > 1 {
			fmt.Fprintf(&b, " %d ×", n)
		}
		b.WriteString(" " + name)
		i += n * size
	}
	b.WriteString("⟧")
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// shown is a value as the page shows it: its lines, and how much of it
// was left out (zero when all of it is on the page).
type shown struct {
	Lines []line
	// LeftOut is the bytes of the value not on the page, Total its size.
	LeftOut, Total int
	// Cost is what the shown part weighs on the page (weight).
	Cost int
}

// Weights of what a value puts on a page, in bytes of HTML: a marker's
// element around its name, a line's element, a character the page
// escapes (<, >, &, ', ").
const (
	markWeight = 32
	lineWeight = 24
	escWeight  = 5
)

// weight is what a plain run of text weighs on the page.
func weight(text string) int {
	n := len(text)
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '<', '>', '&', '\'', '"':
			n += escWeight - 1
		}
	}
	return n
}

// segWeight is what one segment weighs on the page.
func (g seg) weight() int {
	if g.Mark || g.Note {
		return len(g.Text) + markWeight
	}
	return weight(g.Text)
}

// Clipped reports whether part of the value is not shown.
func (s shown) Clipped() bool { return s.LeftOut > 0 }

// showJSON indents a JSON value (json.Indent only adds white space),
// writes its strings' escapes as the characters they stand for
// (unescapeStrings), and shows as much of the result as weighs at most
// limit bytes of page (limit ≤ 0: all of it). Bytes that are not JSON
// are shown as text.
func showJSON(raw []byte, limit int) shown {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return showText(raw, limit)
	}
	return showIndented(b.Bytes(), limit)
}

// showIndented is showJSON of JSON json.Indent indented already.
func showIndented(indented []byte, limit int) shown {
	u := unescapeStrings(indented)
	lines := strings.Split(u, "\n")
	return fitLines(len(lines), func(i int) []seg { return visibleUpTo(lines[i], true, limit) }, len(u), limit)
}

// showInline shows a short value on one line (an id, a tool's name, a
// reason, a header): a newline in it is a marker that names it, as any
// other control is, not a line break a person may take for the page's.
func showInline(b []byte, limit int) shown {
	return fitLines(1, func(int) []seg { return visibleUpTo(string(b), false, limit) }, len(b), limit)
}

// showText shows text by lines, each made visible, as much of it as
// weighs at most limit bytes of page (limit ≤ 0: all of it). The limit
// is on what the page weighs, not on the value's bytes: a character
// outside printable ASCII is a marker that names it, some fifty bytes
// of page for two or three of value, and a limit on the value's bytes
// let a value of such characters weigh twenty times its limit.
func showText(b []byte, limit int) shown {
	lines := strings.Split(string(b), "\n")
	return fitLines(len(lines), func(i int) []seg { return visibleUpTo(lines[i], false, limit) }, len(b), limit)
}

// fitLines shows n lines of a value of total bytes, line i made of segs(i)
// (asked in order, and only for the lines reached), as much of them as
// weighs at most limit bytes of page (limit ≤ 0: all of it): showText's
// lines, or those of a value already shown (shown.clip).
func fitLines(n int, segs func(i int) []seg, total, limit int) shown {
	s := shown{Total: total}
	used := 0 // bytes of the value shown
	for li := 0; li < n; li++ {
		if li > 0 {
			used++ // the newline before this line
		}
		cost := lineWeight
		if limit > 0 && s.Cost+cost > limit {
			if li > 0 {
				used--
			}
			break
		}
		s.Cost += cost
		var kept []seg
		full := true
		for _, g := range segs(li) {
			w := g.weight()
			if limit <= 0 || s.Cost+w <= limit {
				kept = append(kept, g)
				s.Cost += w
				used += len(g.Raw) + len(g.Text)*btoi(!g.Mark && !g.Note)
				continue
			}
			full = false
			if !g.Mark && !g.Note {
				// Plain text is cut on a character boundary, weighed one
				// character at a time (weighing each prefix whole would be
				// quadratic in a long line).
				cut, w := cutPlain(g.Text, limit-s.Cost)
				if cut > 0 {
					kept = append(kept, seg{Text: g.Text[:cut]})
					s.Cost += w
					used += cut
				}
			}
			break
		}
		s.Lines = append(s.Lines, line{Segs: kept})
		if !full {
			break
		}
	}
	s.LeftOut = total - used
	return s
}

// cutPlain is how much of plain text fits in room bytes of page, cut
// on a character boundary, and what that weighs.
func cutPlain(text string, room int) (cut, w int) {
	for cut < len(text) {
		_, n := utf8.DecodeRuneInString(text[cut:])
		rw := weight(text[cut : cut+n])
		if w+rw > room {
			break
		}
		cut, w = cut+n, w+rw
	}
	return cut, w
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// raw is the text the shown lines stand for (markers as what they stand
// for), lines joined by newlines.
func (s shown) raw() string {
	var b strings.Builder
	for i, l := range s.Lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		for _, g := range l.Segs {
			if g.Mark {
				b.WriteString(g.Raw)
			} else if !g.Note {
				b.WriteString(g.Text)
			}
		}
	}
	return b.String()
}

// unescapeStrings writes every \uXXXX escape inside the strings of a
// JSON text as the character it stands for (a surrogate pair as one
// character), and \/ as /: the same JSON value, spelled as it runs. A
// model may spell rm as \u0072m, a newline as \u000a and an override
// as \u202e; written as characters, the page shows rm, \n, and the
// override's marker, never an escape a person has to decode. The
// escapes that must stay are written in their short form: \" \\ \b
// \f \n \r \t, other controls as \u00XX, and a lone surrogate as it
// came (the workers refuse it).
func unescapeStrings(b []byte) string {
	var out strings.Builder
	out.Grow(len(b))
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			in = !in
			out.WriteByte(c)
			continue
		case c != '\\' || !in || i+1 >= len(b):
			// c, and the run after it up to the next quote or
			// backslash, as they are: one copy, not a write a byte.
			j := i + 1
			for j < len(b) && b[j] != '"' && b[j] != '\\' {
				j++
			}
			out.Write(b[i:j])
			i = j - 1
			continue
		}
		switch b[i+1] {
		case '/':
			out.WriteByte('/')
			i++
			continue
		case 'u':
		default:
			out.WriteByte(c)
			out.WriteByte(b[i+1])
			i++
			continue
		}
		r, n := hex4(b[i+2:])
		if n == 0 {
			out.WriteByte(c)
			continue
		}
		size := 6
		if utf16.IsSurrogate(r) {
			r2, n2 := rune(-1), 0
			if i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				r2, n2 = hex4(b[i+8:])
			}
			d := utf16.DecodeRune(r, r2)
			if n2 == 0 || d == utf8.RuneError {
				out.Write(b[i : i+6]) // a lone surrogate, as it came
				i += 5
				continue
			}
			r, size = d, 12
		}
		switch {
		case r == '"':
			out.WriteString(`\"`)
		case r == '\\':
			out.WriteString(`\\`)
		case r == '\b':
			out.WriteString(`\b`)
		case r == '\f':
			out.WriteString(`\f`)
		case r == '\n':
			out.WriteString(`\n`)
		case r == '\r':
			out.WriteString(`\r`)
		case r == '\t':
			out.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(&out, `\u%04x`, r)
		default:
			out.WriteRune(r)
		}
		i += size - 1
	}
	return out.String()
}

// hex4 reads four hex digits; n is 0 when they are not.
func hex4(b []byte) (r rune, n int) {
	if len(b) < 4 {
		return 0, 0
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	if err != nil {
		return 0, 0
	}
	return rune(v), 4
}
