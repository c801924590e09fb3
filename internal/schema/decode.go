package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// errSyntax is all decodeAny says about bad input: the repair ladder, which
// runs next, reports the details.
var errSyntax = errors.New("invalid JSON")

// maxDepth matches encoding/json's nesting limit.
const maxDepth = 10000

// decodeAny parses one JSON value, surrounded by optional white space, into
// the shapes a json.Decoder with UseNumber produces (map[string]any,
// []any, string, json.Number, bool, nil). It is the hot path of every
// call: arguments are parsed once, in a single pass without the
// decoder's buffering, and FuzzDecodeAny holds it to encoding/json's
// results.
func decodeAny(s string) (any, error) {
	v, _, err := decodeAnyNumbers(s)
	return v, err
}

// numberKinds says what the numbers of a decoded value look like, so
// that the walks over them can be skipped when there is nothing to find.
type numberKinds struct {
	// fractionOrExponent: some number has a '.', 'e' or 'E' (it may be
	// an integral number not in integer form).
	fractionOrExponent bool
	// long: some number is long enough to be out of the supported range.
	long bool
}

// decodeAnyNumbers is decodeAny that also reports its numbers' kinds.
func decodeAnyNumbers(s string) (any, numberKinds, error) {
	d := decoder{s: s}
	d.space()
	v, err := d.value(0)
	if err != nil {
		return nil, numberKinds{}, err
	}
	d.space()
	if d.i != len(d.s) {
		return nil, numberKinds{}, errSyntax
	}
	return v, d.kinds, nil
}

type decoder struct {
	s     string
	i     int
	kinds numberKinds
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
	if depth > maxDepth {
		return nil, errSyntax
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
		m[k] = v
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
	if depth > maxDepth {
		return nil, errSyntax
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

// str parses a string, replacing invalid UTF-8 and lone surrogates with
// U+FFFD as encoding/json does.
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
					r2 := utf8.RuneError
					if strings.HasPrefix(d.s[d.i:], `\u`) {
						save := d.i
						d.i += 2
						if lo, ok := d.hex4(); ok {
							if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
								r2 = dec
							} else {
								d.i = save
							}
						} else {
							return "", errSyntax
						}
					}
					r = r2
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
			b.WriteRune(r) // RuneError for an invalid byte, as encoding/json
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
		d.kinds.fractionOrExponent = true
		d.i++
		if d.digits() == 0 {
			return nil, errSyntax
		}
	}
	if d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		d.kinds.fractionOrExponent = true
		d.i++
		if d.i < len(d.s) && (d.s[d.i] == '+' || d.s[d.i] == '-') {
			d.i++
		}
		if d.digits() == 0 {
			return nil, errSyntax
		}
	}
	// A plain integer of up to 300 digits is always within range (see
	// usableNumber); anything with an exponent or longer is checked.
	if d.i-start > 300 {
		d.kinds.long = true
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
