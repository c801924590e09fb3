package schema

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// errSyntax is all decodeAny says about bad input: the repair ladder, which
// runs next, reports the details.
var errSyntax = errors.New("invalid JSON")

// decodeError is a refusal the decoder can word itself: a string that
// holds no text (invalid UTF-8, a lone surrogate) or a value nested deeper
// than MaxDepth. Other syntax errors are errSyntax, for the ladder.
type decodeError struct {
	off  int
	what string
}

func (e *decodeError) Error() string { return e.what }

// decodeAny parses one JSON value, surrounded by optional white space, into
// the shapes a json.Decoder with UseNumber produces (map[string]any,
// []any, string, json.Number, bool, nil). It is the hot path of every
// call: arguments are parsed once, in a single pass without the
// decoder's buffering, and FuzzDecodeAny holds it to encoding/json's
// results.
func decodeAny(s string) (any, error) {
	v, _, err := decodeAnyNotes(s)
	return v, err
}

// decodeNotes says what the decoder saw that the walks over a decoded
// value would otherwise have to look for.
type decodeNotes struct {
	// fractionOrExponent: some number has a '.', 'e' or 'E' (it may be
	// an integral number not in integer form).
	fractionOrExponent bool
	// long: some number is long enough to be out of the supported range.
	long bool
	// duplicateKey: some object has a key twice. The value keeps the last,
	// as encoding/json does, but the text still has both.
	duplicateKey bool
}

// decodeAnyNotes is decodeAny that also reports what it noticed.
func decodeAnyNotes(s string) (any, decodeNotes, error) {
	d := decoder{s: s}
	d.space()
	v, err := d.value(0)
	if err != nil {
		return nil, decodeNotes{}, err
	}
	d.space()
	if d.i != len(d.s) {
		return nil, decodeNotes{}, errSyntax
	}
	return v, d.notes, nil
}

type decoder struct {
	s     string
	i     int
	notes decodeNotes
}

func (d *decoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, error) {
	if d.i >= len(d.s) {
		return nil, errSyntax
	}
	switch c := d.s[d.i]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.str()
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case strings.HasPrefix(d.s[d.i:], "true"):
		d.i += 4
		return true, nil
	case strings.HasPrefix(d.s[d.i:], "false"):
		d.i += 5
		return false, nil
	case strings.HasPrefix(d.s[d.i:], "null"):
		d.i += 4
		return nil, nil
	}
	return nil, errSyntax
}

func (d *decoder) object(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, &decodeError{off: d.i, what: tooDeep}
	}
	d.i++ // {
	m := map[string]any{}
	d.space()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		return m, nil
	}
	for {
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return nil, errSyntax
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != ':' {
			return nil, errSyntax
		}
		d.i++
		d.space()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		n := len(m)
		m[k] = v
		if len(m) == n {
			d.notes.duplicateKey = true
		}
		d.space()
		if d.i >= len(d.s) {
			return nil, errSyntax
		}
		switch d.s[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return m, nil
		default:
			return nil, errSyntax
		}
	}
}

func (d *decoder) array(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, &decodeError{off: d.i, what: tooDeep}
	}
	d.i++ // [
	arr := []any{}
	d.space()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		d.i++
		return arr, nil
	}
	for {
		d.space()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		d.space()
		if d.i >= len(d.s) {
			return nil, errSyntax
		}
		switch d.s[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return arr, nil
		default:
			return nil, errSyntax
		}
	}
}

// str parses a string. Invalid UTF-8 and lone surrogate escapes, which
// encoding/json would replace with U+FFFD (so that the value validated
// would not be the text sent), are refused with a *decodeError.
func (d *decoder) str() (string, error) {
	d.i++ // "
	start := d.i
	// Fast path: no escapes, valid UTF-8, no control characters.
	for d.i < len(d.s) {
		c := d.s[d.i]
		if c == '"' {
			s := d.s[start:d.i]
			d.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		d.i++
	}
	var b strings.Builder
	b.WriteString(d.s[start:d.i])
	for d.i < len(d.s) {
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return b.String(), nil
		case c < 0x20:
			return "", errSyntax
		case c == '\\':
			if d.i+1 >= len(d.s) {
				return "", errSyntax
			}
			at := d.i
			e := d.s[d.i+1]
			d.i += 2
			switch e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return "", errSyntax
				}
				if utf16.IsSurrogate(r) {
					lo, ok := rune(0), false
					if r < 0xdc00 && strings.HasPrefix(d.s[d.i:], `\u`) {
						d.i += 2
						if lo, ok = d.hex4(); !ok {
							return "", errSyntax
						}
					}
					if r = utf16.DecodeRune(r, lo); !ok || r == utf8.RuneError {
						return "", &decodeError{off: at, what: loneSurrogate(d.s[at : at+6])}
					}
				}
				b.WriteRune(r)
			default:
				return "", errSyntax
			}
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			d.i++
		default:
			r, size := utf8.DecodeRuneInString(d.s[d.i:])
			if r == utf8.RuneError && size == 1 {
				return "", &decodeError{off: d.i, what: notUTF8(c)}
			}
			b.WriteString(d.s[d.i : d.i+size])
			d.i += size
		}
	}
	return "", errSyntax
}

func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(d.s[d.i : d.i+4]) {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	d.i += 4
	return r, true
}

// number checks the JSON number grammar and keeps the literal.
func (d *decoder) number() (any, error) {
	start := d.i
	if d.s[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.s) && d.s[d.i] == '0':
		d.i++
	case d.i < len(d.s) && d.s[d.i] >= '1' && d.s[d.i] <= '9':
		d.digits()
	default:
		return nil, errSyntax
	}
	if d.i < len(d.s) && d.s[d.i] == '.' {
		d.notes.fractionOrExponent = true
		d.i++
		if d.digits() == 0 {
			return nil, errSyntax
		}
	}
	small := false
	if d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		d.notes.fractionOrExponent = true
		d.i++
		if d.i < len(d.s) && (d.s[d.i] == '+' || d.s[d.i] == '-') {
			small = d.s[d.i] == '-'
			d.i++
		}
		if d.digits() == 0 {
			return nil, errSyntax
		}
	}
	// A plain integer of up to 300 digits is always within range (see
	// usableNumber); anything with an exponent or longer is checked.
	if d.i-start > 300 {
		d.notes.long = true
	}
	if (small || d.notes.long) && underflows(d.s[start:d.i]) {
		return nil, &decodeError{off: start, what: tooSmall(d.s[start:d.i])}
	}
	return json.Number(d.s[start:d.i]), nil
}

func (d *decoder) digits() int {
	n := 0
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}

// duplicateKey returns the JSON pointer of the first key that appears a
// second time in its object, in text that decodes (or "" when none does).
// It runs only when the decoder saw a duplicate, so it walks the text
// again with encoding/json rather than slow the decoder down.
func duplicateKey(text string) string {
	dec := json.NewDecoder(strings.NewReader(text))
	type frame struct {
		path  string
		keys  map[string]bool // nil for an array
		next  int             // an array's next index
		key   string          // an object's key whose value comes next
		value bool            // an object's next token is that value
	}
	var stack []*frame
	// child is the pointer of the value that comes next.
	child := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.keys != nil {
			f.value = false
			return f.path + "/" + escape(f.key)
		}
		f.next++
		return f.path + "/" + strconv.Itoa(f.next-1)
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil && !stack[n-1].value {
			f := stack[n-1]
			k, ok := tok.(string)
			if !ok { // the object's '}'
				stack = stack[:n-1]
				continue
			}
			if f.keys[k] {
				return f.path + "/" + escape(k)
			}
			f.keys[k], f.key, f.value = true, k, true
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{path: child(), keys: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, &frame{path: child()})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			child()
		}
	}
}
