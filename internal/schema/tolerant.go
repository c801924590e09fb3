package schema

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// feature is one lossless deviation from JSON the tolerant reader accepted.
// Each has exactly one reading: the reader never closes what was cut off,
// never drops content and never invents a value, so the value it yields
// holds the text's own strings and numbers and nothing else.
type feature uint16

const (
	fTrailingComma  feature = 1 << iota // {"a":1,} [1,]
	fComments                           // // line and /* block */ comments
	fUnquotedKeys                       // {path: "x"}
	fSingleQuotes                       // 'text' (an apostrophe inside ends it, so it is refused)
	fPythonLiterals                     // True, False, None
	fExtraCloser                        // {"a":1}} — a stray closer after the complete object
	fWrappingBraces                     // {{"a":1}} — one redundant pair around the object
	fControlChars                       // a raw newline or tab inside a string
	fInvalidEscapes                     // \d kept as a backslash and a d
	fMissingComma                       // {"a":1 "b":2} — white space between two members
	fUnicodeSpace                       // a no-break, zero-width or other Unicode space between tokens
)

// unicodeSpaces are the spaces outside JSON's four that models and their
// templates leave between tokens; outside a string they can mean nothing.
var unicodeSpaces = [...]string{"\u00a0", "\ufeff", "\u200b", "\u2028", "\u2029", "\u202f", "\u3000"}

// readError is where and why the tolerant reader stopped.
type readError struct {
	off       int    // byte offset in the text read
	truncated bool   // the text ended before the value did
	ptr       string // JSON pointer of the value being read
	what      string // the problem, e.g. "expected ':' after the key"
	ambiguous bool   // the text has more than one reading
	unusable  bool   // the text has one reading, and it cannot be used
}

// tolerant reads one JSON object, accepting the lossless deviations listed
// by feature, and writes it out as compact JSON. It is a recursive-descent
// reader over the text as sent, so offsets in its errors are the model's
// own.
type tolerant struct {
	s     string
	i     int
	out   []byte
	used  feature
	depth int
	// committed is set once a key and its ':' were read anywhere: from
	// then on the text is evidently meant as JSON, and a syntax error is
	// an error, not prose that happens to contain a brace.
	committed bool
	path      []pathTok
	err       *readError
}

// pathTok is one step of the JSON pointer to the value being read: an
// array index, or an object key as the output span of its JSON string
// (decoded only when an error needs it).
type pathTok struct {
	key        bool
	start, end int
	index      int
}

// readObject reads the object starting at s[start] == '{'. On success the
// returned end is the offset just after the object.
func readObject(s string, start int) (t *tolerant, end int, ok bool) {
	t = &tolerant{s: s, i: start, out: make([]byte, 0, len(s)-start+8)}
	if !t.object(true) {
		return t, t.i, false
	}
	return t, t.i, true
}

func (t *tolerant) pointer() string {
	var b []byte
	for _, p := range t.path {
		b = append(b, '/')
		if !p.key {
			b = strconv.AppendInt(b, int64(p.index), 10)
			continue
		}
		var k string
		if p.end > p.start && p.end <= len(t.out) {
			_ = json.Unmarshal(t.out[p.start:p.end], &k)
		}
		b = append(b, escape(k)...)
	}
	return string(b)
}

func (t *tolerant) fail(what string) bool {
	if t.err == nil {
		t.err = &readError{off: t.i, ptr: t.pointer(), what: what}
	}
	return false
}

// eof fails because the text ended while inside what.
func (t *tolerant) eof(inside string) bool {
	if t.err == nil {
		t.err = &readError{off: min(t.i, len(t.s)), truncated: true, ptr: t.pointer(), what: inside}
	}
	return false
}

// unusable fails at off: the text there reads as something no tool may
// be given (a lone surrogate, a byte that is not UTF-8, too deep).
func (t *tolerant) unusable(off int, what string) bool {
	if t.err == nil {
		t.err = &readError{off: off, ptr: t.pointer(), what: what, unusable: true}
	}
	return false
}

func (t *tolerant) ambiguous(what string) bool {
	if t.err == nil {
		t.err = &readError{off: t.i, ptr: t.pointer(), what: what, ambiguous: true}
	}
	return false
}

// space skips JSON white space and comments. It reports whether it
// skipped anything in sp; ok is false when a block comment never ends.
func (t *tolerant) space() (sp, ok bool) {
	for t.i < len(t.s) {
		switch t.s[t.i] {
		case ' ', '\t', '\n', '\r':
			t.i++
			sp = true
			continue
		case '/':
			if t.endsAt(t.i + 1) {
				return sp, t.eof("a comment")
			}
			if t.s[t.i+1] == '/' {
				t.used |= fComments
				t.i += 2
				for t.i < len(t.s) && t.s[t.i] != '\n' {
					t.i++
				}
				sp = true
				continue
			}
			if t.s[t.i+1] == '*' {
				t.used |= fComments
				from := t.i
				t.i += 2
				for {
					if t.i+1 >= len(t.s) {
						t.i = from
						return sp, t.eof("a /* comment */")
					}
					if t.s[t.i] == '*' && t.s[t.i+1] == '/' {
						t.i += 2
						break
					}
					t.i++
				}
				sp = true
				continue
			}
		default:
			if t.s[t.i] >= 0x80 {
				if n := unicodeSpaceAt(t.s[t.i:]); n > 0 {
					t.used |= fUnicodeSpace
					t.i += n
					sp = true
					continue
				}
			}
		}
		return sp, true
	}
	return sp, true
}

// atEnd reports whether the object's text ends at t.i: at the end of the
// arguments, or, between tokens, where a Markdown fence, a template token
// (<|call|>) or a closing tag (</tool_call>) starts. None of them can stand
// between JSON tokens, so an object still open there was cut off.
func (t *tolerant) atEnd() bool {
	if t.i >= len(t.s) {
		return true
	}
	switch t.s[t.i] {
	case '`':
		return strings.HasPrefix(t.s[t.i:], "```")
	case '<':
		// <｜ (U+FF5C) opens DeepSeek's template tokens.
		return strings.HasPrefix(t.s[t.i:], "<|") || strings.HasPrefix(t.s[t.i:], "</") ||
			strings.HasPrefix(t.s[t.i:], "<\uff5c")
	}
	return false
}

// endsAt reports whether the object's text ends at j, after white space.
func (t *tolerant) endsAt(j int) bool {
	for j < len(t.s) && isJSONSpace(t.s[j]) {
		j++
	}
	u := tolerant{s: t.s, i: j}
	return u.atEnd()
}

func (t *tolerant) value() bool {
	if _, ok := t.space(); !ok {
		return false
	}
	if t.atEnd() {
		return t.eof("a value")
	}
	switch c := t.s[t.i]; {
	case c == '{':
		return t.object(false)
	case c == '[':
		return t.array()
	case c == '"' || c == '\'':
		return t.str(c)
	case c == '-' || isDigit(c):
		return t.number()
	default:
		return t.literal()
	}
}

func (t *tolerant) enter() bool {
	if t.depth++; t.depth > MaxDepth {
		return t.unusable(t.i, tooDeep)
	}
	return true
}

// object reads an object; at the top, one redundant pair of braces around
// it is accepted ({{…}}).
func (t *tolerant) object(top bool) bool {
	if !t.enter() {
		return false
	}
	ok := t.objectBody(top)
	t.depth--
	return ok
}

func (t *tolerant) objectBody(top bool) bool {
	t.i++ // '{'
	if _, ok := t.space(); !ok {
		return false
	}
	if top && t.i < len(t.s) && t.s[t.i] == '{' {
		t.used |= fWrappingBraces
		if !t.object(false) {
			return false
		}
		if _, ok := t.space(); !ok {
			return false
		}
		if t.atEnd() {
			return t.eof("the outer pair of braces, before its '}'")
		}
		if t.s[t.i] != '}' {
			return t.fail("expected '}' closing the extra pair of braces around the object")
		}
		t.i++
		return true
	}
	t.out = append(t.out, '{')
	n := 0
	for {
		if _, ok := t.space(); !ok {
			return false
		}
		if t.atEnd() {
			return t.eof("an object, before its closing '}'")
		}
		c := t.s[t.i]
		if c == '}' {
			t.i++
			t.out = append(t.out, '}')
			return true
		}
		if n > 0 {
			return t.fail("expected ',' or '}' after the member")
		}
		if !t.member() {
			return false
		}
		n++
		sp, ok := t.space()
		if !ok {
			return false
		}
		if t.atEnd() {
			return t.eof("an object, before its closing '}'")
		}
		switch c := t.s[t.i]; {
		case c == ',':
			t.i++
			if _, ok := t.space(); !ok {
				return false
			}
			if t.i < len(t.s) && t.s[t.i] == '}' {
				t.used |= fTrailingComma
				continue
			}
			t.out = append(t.out, ',')
			n = 0
		case c == '}':
			continue
		case sp && (c == '"' || c == '\'' || isIdentStart(c)):
			// Two members with only white space between them: the next
			// key still has to be followed by ':' to be read as one.
			t.used |= fMissingComma
			t.out = append(t.out, ',')
			n = 0
		default:
			return t.fail("expected ',' or '}' after the member")
		}
	}
}

// member reads one key, its ':' and its value.
func (t *tolerant) member() bool {
	c := t.s[t.i]
	start := len(t.out)
	switch {
	case c == '"' || c == '\'':
		if !t.str(c) {
			if t.err != nil && t.err.truncated {
				t.err.what = "a key"
			}
			return false
		}
	case isIdentStart(c):
		j := t.i + 1
		for j < len(t.s) && isIdentChar(t.s[j]) {
			j++
		}
		if j == len(t.s) {
			return t.eof("a key")
		}
		if k := t.s[t.i:j]; k == "True" || k == "False" || k == "None" {
			// Python's dict key True is the boolean ("true" once
			// encoded), JavaScript's the text "True".
			return t.ambiguous("the unquoted key " + k + " is a Python literal (the key " + strconv.Quote(strings.ToLower(strings.Replace(k, "None", "null", 1))) + " once encoded as JSON) or the text " + strconv.Quote(k) + "; write the key in double quotes")
		}
		t.used |= fUnquotedKeys
		t.out = append(t.out, '"')
		t.out = append(t.out, t.s[t.i:j]...)
		t.out = append(t.out, '"')
		t.i = j
	default:
		return t.fail("expected a key in double quotes or '}'")
	}
	t.path = append(t.path, pathTok{key: true, start: start, end: len(t.out)})
	if _, ok := t.space(); !ok {
		return false
	}
	if t.atEnd() {
		return t.eof("a member, before its ':'")
	}
	if t.s[t.i] != ':' {
		return t.fail("expected ':' after the key")
	}
	t.i++
	t.committed = true
	t.out = append(t.out, ':')
	if !t.value() {
		return false
	}
	t.path = t.path[:len(t.path)-1]
	return true
}

func (t *tolerant) array() bool {
	if !t.enter() {
		return false
	}
	ok := t.arrayBody()
	t.depth--
	return ok
}

func (t *tolerant) arrayBody() bool {
	t.i++ // '['
	t.out = append(t.out, '[')
	t.path = append(t.path, pathTok{})
	n, afterComma := 0, false
	for {
		if _, ok := t.space(); !ok {
			return false
		}
		if t.atEnd() {
			return t.eof("an array, before its closing ']'")
		}
		if t.s[t.i] == ']' {
			if afterComma {
				t.used |= fTrailingComma
			}
			t.i++
			t.out = append(t.out, ']')
			t.path = t.path[:len(t.path)-1]
			return true
		}
		if n > 0 && !afterComma {
			// No missing-comma repair in arrays: "a" "b" reads as one
			// string in Python, two elements in a comma-less list.
			return t.fail("expected ',' or ']' after the element")
		}
		if afterComma {
			t.out = append(t.out, ',')
		}
		t.path[len(t.path)-1].index = n
		if !t.value() {
			return false
		}
		n++
		if _, ok := t.space(); !ok {
			return false
		}
		afterComma = false
		if t.i < len(t.s) && t.s[t.i] == ',' {
			t.i++
			afterComma = true
		}
	}
}

// str reads a string quoted with q and writes it as a JSON string with the
// same content: raw control characters are escaped, an escape no common
// language reads as a character (\d) is kept as a literal backslash and
// character, and in a single-quoted string \' is an apostrophe, " needs no
// escape and \x41, \u0041 and \U00000041 are characters (as in Python's
// repr). Everything with two readings or none is refused: an escape JSON
// lacks that other languages read as a character (\x1b, \v, \0), a lone
// surrogate, an incomplete \u escape, a byte that is not UTF-8.
func (t *tolerant) str(q byte) bool {
	if q == '\'' {
		t.used |= fSingleQuotes
	}
	t.i++
	t.out = append(t.out, '"')
	for {
		j := t.i
		for j < len(t.s) {
			c := t.s[j]
			if c == q || c == '\\' || c < 0x20 || c == '"' || c >= utf8.RuneSelf {
				break
			}
			j++
		}
		t.out = append(t.out, t.s[t.i:j]...)
		t.i = j
		if t.i >= len(t.s) {
			return t.eof("a string")
		}
		c := t.s[t.i]
		switch {
		case c == q:
			t.i++
			t.out = append(t.out, '"')
			return true
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRuneInString(t.s[t.i:])
			if r == utf8.RuneError && n == 1 {
				if m := partialRune(t.s[t.i:]); m > 0 && t.endsAt(t.i+m) {
					t.i += m // a character cut in half, where the text ends
					return t.eof("a string")
				}
				return t.unusable(t.i, notUTF8(c))
			}
			t.out = append(t.out, t.s[t.i:t.i+n]...)
			t.i += n
		case c == '"': // inside single quotes
			t.i++
			t.out = append(t.out, '\\', '"')
		case c < 0x20:
			t.used |= fControlChars
			t.i++
			t.out = appendControl(t.out, c)
		default: // backslash
			if t.i+1 >= len(t.s) {
				t.i = len(t.s)
				return t.eof("a string")
			}
			if !t.escape(q) {
				return false
			}
		}
	}
}

// escape reads the escape at t.s[t.i] == '\\' in a string quoted with q.
func (t *tolerant) escape(q byte) bool {
	at := t.i
	switch e := t.s[t.i+1]; e {
	case '/':
		if q == '\'' {
			// Python keeps the backslash, JavaScript and JSON5 drop it.
			return t.ambiguousAt(at, `\/ between single quotes is a slash in JavaScript but a backslash and a slash in Python; write / for the slash, or \\/ for a backslash and a slash`)
		}
		t.out = append(t.out, '\\', e)
		t.i += 2
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		t.out = append(t.out, '\\', e)
		t.i += 2
	case 'u':
		if t.i+2 < len(t.s) && t.s[t.i+2] == '{' {
			return t.ambiguousAt(at, readsAsChar(`\u{`, -1, "JavaScript"))
		}
		r, n, ok := t.hexAt(t.i+2, 4)
		switch {
		case !ok:
			return false
		case n == 0:
			// \users: no language reads a character here.
			t.used |= fInvalidEscapes
			t.out = append(t.out, '\\', '\\', 'u')
			t.i += 2
			return true
		case n < 4:
			return t.unusable(at, incompleteEscape(t.s[at:t.i+2+n], 4))
		}
		if !utf16.IsSurrogate(r) {
			t.out = append(t.out, t.s[at:at+6]...)
			t.i += 6
			return true
		}
		if r < 0xdc00 && strings.HasPrefix(t.s[at+6:], `\u`) {
			lo, n, ok := t.hexAt(at+8, 4)
			switch {
			case !ok:
				return false
			case n > 0 && n < 4:
				return t.unusable(at+6, incompleteEscape(t.s[at+6:at+8+n], 4))
			case n == 4 && utf16.DecodeRune(r, lo) != utf8.RuneError:
				t.out = append(t.out, t.s[at:at+12]...)
				t.i += 12
				return true
			}
		} else if r < 0xdc00 && (t.endsWithin(at+6, `\u`) || t.endsAt(at+6) ||
			at+6 < len(t.s) && t.s[at+6] == '\\' && t.endsAt(at+7)) {
			t.i = len(t.s)
			return t.eof("a string")
		}
		return t.unusable(at, loneSurrogate(t.s[at:at+6]))
	case 'x', 'U':
		digits := 2
		if e == 'U' {
			digits = 8
		}
		r, n, ok := t.hexAt(t.i+2, digits)
		switch {
		case !ok:
			return false
		case n == 0:
			// C:\Users, \xyz: no language reads a character here.
			t.used |= fInvalidEscapes
			t.out = append(t.out, '\\', '\\')
			t.i++
			return true
		case q == '\'' && n == digits && utf8.ValidRune(r):
			t.out = appendRune(t.out, r)
			t.i += 2 + n
			return true
		case q == '\'' && n < digits:
			return t.unusable(at, incompleteEscape(t.s[at:t.i+2+n], digits))
		case q == '\'':
			return t.unusable(at, "the escape "+t.s[at:t.i+2+n]+" is no Unicode character; write the character itself")
		}
		if n < digits {
			// \xA, \U1F680: too few digits for Python, JavaScript or C.
			return t.unusable(at, incompleteEscape(t.s[at:t.i+2+n], digits))
		}
		if !utf8.ValidRune(r) {
			r = -1
		}
		langs := "Python and JavaScript"
		if e == 'U' {
			langs = "Python" // JavaScript reads \U as U
		}
		return t.ambiguousAt(at, readsAsChar(t.s[at:t.i+2+n], r, langs))
	case 'a', 'v', 'e':
		r, langs := rune(7), "Python and C"
		switch e {
		case 'v':
			r, langs = 0x0b, "Python, JavaScript and C"
		case 'e':
			r, langs = 0x1b, "Bash, Perl and Ruby"
		}
		return t.ambiguousAt(at, readsAsChar(t.s[at:at+2], r, langs))
	case '0', '1', '2', '3', '4', '5', '6', '7':
		k, r := t.i+1, rune(0)
		for k < len(t.s) && k < t.i+4 && t.s[k] >= '0' && t.s[k] <= '7' {
			r = r*8 + rune(t.s[k]-'0')
			k++
		}
		if r > 0o377 {
			// \777: Python reads three digits (U+01FF), JavaScript and
			// C two (\77 and a 7): no one character to suggest.
			r = -1
		}
		return t.ambiguousAt(at, readsAsChar(t.s[at:k], r, "Python, JavaScript and C (octal)"))
	case '\n', '\r', 0xe2:
		if e == 0xe2 && !strings.HasPrefix(t.s[t.i+1:], "\u2028") && !strings.HasPrefix(t.s[t.i+1:], "\u2029") {
			return t.keepBackslash() // another character
		}
		if q == '\'' {
			// Python and JavaScript read a line continuation: nothing
			// (JavaScript and JSON5 after U+2028 and U+2029 too).
			return t.ambiguousAt(at, `a backslash before a line break between single quotes is a line continuation (no character) in Python and JavaScript but a backslash and a line break as written; write \\\n for a backslash and a line break, or join the lines`)
		}
		return t.keepBackslash()
	case 'N':
		if t.i+2 < len(t.s) && t.s[t.i+2] == '{' {
			return t.ambiguousAt(at, readsAsChar(`\N{`, -1, "Python (a named character)"))
		}
		fallthrough
	case '\'':
		if e == '\'' {
			if q != '\'' {
				return t.ambiguous(`the string has \' which JSON does not define: it could mean ' or \'; write ' for an apostrophe, or \\' for a backslash and an apostrophe`)
			}
			t.out = append(t.out, '\'')
			t.i += 2
			return true
		}
		fallthrough
	default:
		return t.keepBackslash()
	}
	return true
}

// keepBackslash keeps the backslash at t.i as content; the character
// after it is read as content next. A backslash before a raw line break
// between double quotes stays too: in a shell command, the most common
// place for one, it is a line continuation the shell must see.
func (t *tolerant) keepBackslash() bool {
	t.used |= fInvalidEscapes
	t.out = append(t.out, '\\', '\\')
	t.i++
	return true
}

// hexAt reads up to max hexadecimal digits at j and returns their value
// and count; ok is false (a cut) when the text ends before a digit count
// short of max is settled.
func (t *tolerant) hexAt(j, max int) (r rune, n int, ok bool) {
	for n < max && j+n < len(t.s) && isHex(t.s[j+n]) {
		c := t.s[j+n]
		var d byte
		switch {
		case c <= '9':
			d = c - '0'
		case c >= 'a':
			d = c - 'a' + 10
		default:
			d = c - 'A' + 10
		}
		r = r<<4 | rune(d)
		n++
	}
	if n < max && (j+n >= len(t.s) || t.endsAt(j+n)) {
		t.i = j + n
		return 0, n, t.eof("a string")
	}
	return r, n, true
}

// endsWithin reports whether the text from j is a prefix of want: cut off
// before it could say whether want follows.
func (t *tolerant) endsWithin(j int, want string) bool {
	rest := t.s[min(j, len(t.s)):]
	return len(rest) < len(want) && want[:len(rest)] == rest
}

func (t *tolerant) ambiguousAt(off int, what string) bool {
	t.i = off
	return t.ambiguous(what)
}

// partialRune returns the length of the start of a UTF-8 sequence that s
// begins with and that ends before the sequence is complete, or 0.
func partialRune(s string) int {
	for m := 1; m < utf8.UTFMax && m <= len(s); m++ {
		if m == len(s) || utf8.RuneStart(s[m]) {
			if !utf8.FullRuneInString(s[:m]) {
				return m
			}
			return 0
		}
	}
	return 0
}

// appendRune writes r as the content of a JSON string.
func appendRune(b []byte, r rune) []byte {
	switch {
	case r < 0x20:
		return appendControl(b, byte(r))
	case r == '"' || r == '\\':
		return append(b, '\\', byte(r))
	}
	return utf8.AppendRune(b, r)
}

func appendControl(b []byte, c byte) []byte {
	switch c {
	case '\n':
		return append(b, '\\', 'n')
	case '\t':
		return append(b, '\\', 't')
	case '\r':
		return append(b, '\\', 'r')
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	}
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}

// number reads a number in JSON's grammar exactly and copies it as sent:
// a number is never shortened, completed or reformatted. A number at the
// end of the text may have been cut, so it counts as truncated.
func (t *tolerant) number() bool {
	start := t.i
	j := t.i
	if t.s[j] == '-' {
		j++
	}
	digits := func() int {
		k := j
		for j < len(t.s) && isDigit(t.s[j]) {
			j++
		}
		return j - k
	}
	cut := func() bool { t.i = j; return t.eof("a number") }
	if t.endsAt(j) {
		return cut()
	}
	switch {
	case t.s[j] == '0':
		j++
		if j < len(t.s) && isDigit(t.s[j]) {
			t.i = j
			return t.fail("a number has a leading zero")
		}
	case digits() == 0:
		if t.endsAt(j) {
			return cut()
		}
		t.i = j
		return t.fail("expected a digit in the number")
	}
	if j < len(t.s) && t.s[j] == '.' {
		j++
		if digits() == 0 {
			if t.endsAt(j) {
				return cut()
			}
			t.i = j
			return t.fail("expected a digit after the decimal point")
		}
	}
	if j < len(t.s) && (t.s[j] == 'e' || t.s[j] == 'E') {
		j++
		if j < len(t.s) && (t.s[j] == '+' || t.s[j] == '-') {
			j++
		}
		if digits() == 0 {
			if t.endsAt(j) {
				return cut()
			}
			t.i = j
			return t.fail("expected a digit in the exponent")
		}
	}
	if j == len(t.s) {
		return cut()
	}
	if isIdentChar(t.s[j]) || t.s[j] == '.' {
		t.i = j
		return t.fail("unexpected character after the number")
	}
	if underflows(t.s[start:j]) {
		return t.unusable(start, tooSmall(t.s[start:j]))
	}
	t.out = append(t.out, t.s[start:j]...)
	t.i = j
	return true
}

// literal reads true, false or null, or their Python spellings.
func (t *tolerant) literal() bool {
	j := t.i
	for j < len(t.s) && isIdentChar(t.s[j]) {
		j++
	}
	word := t.s[t.i:j]
	if t.endsAt(j) {
		for _, l := range [...]string{"true", "false", "null", "True", "False", "None"} {
			if len(word) < len(l) && l[:len(word)] == word && word != "" {
				t.i = j
				return t.eof("a literal")
			}
		}
	}
	switch word {
	case "true", "false", "null":
		t.out = append(t.out, word...)
	case "True", "False":
		t.used |= fPythonLiterals
		t.out = append(t.out, word[0]+'a'-'A')
		t.out = append(t.out, word[1:]...)
	case "None":
		t.used |= fPythonLiterals
		t.out = append(t.out, "null"...)
	default:
		if word == "" {
			return t.fail("expected a value")
		}
		return t.fail("expected a value, found unquoted text " + strconv.Quote(excerpt(word, 0, 24)))
	}
	t.i = j
	return true
}

func unicodeSpaceAt(s string) int {
	for _, u := range unicodeSpaces {
		if strings.HasPrefix(s, u) {
			return len(u)
		}
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '-' }
