package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// differential checks, independently of the tolerant reader, that a
// repaired value holds only what the model wrote: every string in it (key
// or value) occurs in the raw text, JSON-unescaped (once, or twice for a
// double-encoded object), and every number occurs there with exactly its
// digits. It is the property that makes a rung lossless, so every test of
// the ladder and FuzzRepair check it.
func differential(raw string, out []byte) error {
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("output %q does not decode: %v", out, err)
	}
	once := unescapeAll(raw)
	// The last view reads \x41 and \U00000041 as characters, as a
	// single-quoted (Python-style) string does.
	views := []string{decodedView(raw), decodedView(once), decodedView(unescapeAll(once)), decodedView(unescapePython(raw))}
	var walk func(v any, ptr string) error
	str := func(s, ptr string) error {
		for _, view := range views {
			if strings.Contains(view, s) {
				return nil
			}
		}
		return fmt.Errorf("string %q at %s is not in the text", s, ptr)
	}
	walk = func(v any, ptr string) error {
		switch v := v.(type) {
		case string:
			return str(v, ptr)
		case json.Number:
			for _, view := range views {
				if hasNumberToken(view, string(v)) {
					return nil
				}
			}
			return fmt.Errorf("number %s at %s is not in the text with these digits", v, ptr)
		case map[string]any:
			for k, e := range v {
				if err := str(k, ptr+"/"+k); err != nil {
					return err
				}
				if err := walk(e, ptr+"/"+k); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range v {
				if err := walk(e, ptr+"/"+strconv.Itoa(i)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(v, "")
}

// unescapeAll decodes, left to right, every escape JSON defines (and \'),
// keeping any other backslash as it is.
func unescapeAll(s string) string { return unescape(s, false) }

// unescapePython is unescapeAll that also decodes \xXX and \UXXXXXXXX.
func unescapePython(s string) string { return unescape(s, true) }

func unescape(s string, python bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		if n := map[byte]int{'x': 2, 'U': 8}[s[i+1]]; python && n > 0 && i+2+n <= len(s) {
			if v, err := strconv.ParseUint(s[i+2:i+2+n], 16, 32); err == nil {
				b.WriteRune(rune(v))
				i += 1 + n
				continue
			}
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/', '\'':
			b.WriteByte(e)
			i++
		case 'b':
			b.WriteByte('\b')
			i++
		case 'f':
			b.WriteByte('\f')
			i++
		case 'n':
			b.WriteByte('\n')
			i++
		case 'r':
			b.WriteByte('\r')
			i++
		case 't':
			b.WriteByte('\t')
			i++
		case 'u':
			r, n := unicodeEscape(s[i:])
			if n == 0 {
				b.WriteByte(c)
				continue
			}
			b.WriteRune(r)
			i += n - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// unicodeEscape decodes the \uXXXX (or surrogate pair) at the start of s as
// encoding/json does, returning the bytes it used (0 if none).
func unicodeEscape(s string) (rune, int) {
	hex := func(s string) (rune, bool) {
		if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(s[2:6], 16, 32)
		return rune(v), err == nil
	}
	r, ok := hex(s)
	if !ok {
		return 0, 0
	}
	if utf16.IsSurrogate(r) {
		if r2, ok := hex(s[6:]); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r, 6
}

// decodedView replaces each invalid UTF-8 byte with U+FFFD, as decoding a
// JSON string does.
func decodedView(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

func hasNumberToken(s, n string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], n)
		if j < 0 {
			return false
		}
		at := i + j
		before := at == 0 || !strings.ContainsRune("0123456789.eE+-", rune(s[at-1]))
		end := at + len(n)
		after := end == len(s) || !strings.ContainsRune("0123456789.eE", rune(s[end]))
		if before && after {
			return true
		}
		i = at + 1
	}
}
