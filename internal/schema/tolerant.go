package schema

import (
	"encoding/json"
	"strconv"
	"strings"
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
	if t.depth++; t.depth > maxNesting {
		return t.fail("the value is nested too deeply")
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
// same content: raw control characters are escaped, an escape JSON does
// not define is kept as a literal backslash and character, and in a
// single-quoted string \' is an apostrophe and " needs no escape.
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
			if c == q || c == '\\' || c < 0x20 || c == '"' {
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
			switch e := t.s[t.i+1]; e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				t.out = append(t.out, '\\', e)
				t.i += 2
			case 'u':
				k := t.i + 2
				for k < len(t.s) && k < t.i+6 && isHex(t.s[k]) {
					k++
				}
				switch {
				case k == t.i+6:
					t.out = append(t.out, t.s[t.i:k]...)
					t.i = k
				case k == len(t.s):
					t.i = k
					return t.eof("a string")
				default:
					t.used |= fInvalidEscapes
					t.out = append(t.out, '\\', '\\', 'u')
					t.i += 2
				}
			case '\'':
				if q != '\'' {
					return t.ambiguous(`the string has \' which JSON does not define: it could mean ' or \'; write ' for an apostrophe, or \\' for a backslash and an apostrophe`)
				}
				t.out = append(t.out, '\'')
				t.i += 2
			default:
				// A backslash before a raw line break stays too: in a shell
				// command, the most common place for one, it is a line
				// continuation the shell must see.
				t.used |= fInvalidEscapes
				t.out = append(t.out, '\\', '\\')
				t.i++ // the character itself is copied as content
			}
		}
	}
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
