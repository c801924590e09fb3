package wire

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// AppendString appends s as a JSON string, byte for byte as json.Marshal
// writes it: <, > and & escaped for HTML, U+2028 and U+2029 escaped, and
// invalid UTF-8 replaced with U+FFFD.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendStrings appends ss as a JSON array of strings (AppendString);
// nil is null.
func AppendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}

// AppendRaw appends raw as json.Marshal writes a json.RawMessage: null when
// nil, else validated and compacted, with HTML's <, > and & and the line
// separators U+2028 and U+2029 escaped. Raw JSON holding any of those
// (none does that json.Marshal wrote) is not appended: ok is false, and
// the caller leaves its value to json.Marshal, which also says what is
// wrong with raw JSON that is not valid.
func AppendRaw(b []byte, raw json.RawMessage) ([]byte, bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	for _, c := range raw {
		if c == '<' || c == '>' || c == '&' || c == 0xe2 {
			return nil, false
		}
	}
	if end, ok := value(raw, 0, 0); ok && end == len(raw) {
		return append(b, raw...), true // compact already: what json.Marshal wrote
	}
	buf := bytes.NewBuffer(b)
	if json.Compact(buf, raw) != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

// maxDepth bounds the nesting value reads; deeper JSON goes to
// json.Compact.
const maxDepth = 64

// value reads one JSON value of d from i as json.Marshal writes raw JSON,
// without whitespace between tokens: valid JSON with whitespace, or with
// nesting over maxDepth, is not read (ok false). It returns the index
// after the value.
func value(d []byte, i, depth int) (end int, ok bool) {
	if i >= len(d) {
		return i, false
	}
	switch c := d[i]; {
	case c == '"':
		return str(d, i)
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return i, false
		}
		close := byte('}')
		if c == '[' {
			close = ']'
		}
		if i++; i < len(d) && d[i] == close {
			return i + 1, true
		}
		for {
			if c == '{' {
				if i >= len(d) || d[i] != '"' {
					return i, false
				}
				if i, ok = str(d, i); !ok || i >= len(d) || d[i] != ':' {
					return i, false
				}
				i++
			}
			if i, ok = value(d, i, depth+1); !ok || i >= len(d) {
				return i, false
			}
			switch d[i] {
			case ',':
				i++
			case close:
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '-' || '0' <= c && c <= '9':
		return number(d, i)
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(d)-i >= len(lit) && string(d[i:i+len(lit)]) == lit {
			return i + len(lit), true
		}
	}
	return i, false
}

// str reads a string from its opening quote at i: no control
// characters, and only the escapes JSON has.
func str(d []byte, i int) (int, bool) {
	for i++; i < len(d); {
		switch c := d[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			if i+1 >= len(d) {
				return i, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) {
					return i, false
				}
				for _, h := range d[i+2 : i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return i, false
					}
				}
				i += 6
			default:
				return i, false
			}
		default:
			i++
		}
	}
	return i, false
}

// number reads a number as JSON writes one.
func number(d []byte, i int) (int, bool) {
	digits := func() bool {
		k := i
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
		return i > k
	}
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case !digits():
		return i, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if !digits() {
			return i, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			return i, false
		}
	}
	return i, true
}
