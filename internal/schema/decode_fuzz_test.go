package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// FuzzDecodeAny: the hot-path parser accepts exactly what encoding/json
// accepts and produces the same values, but for strings that hold no text
// (a byte that is not UTF-8, a lone surrogate escape: encoding/json reads
// both as U+FFFD, so the value would not be the text sent) and values
// nested deeper than MaxDepth, which it refuses with a *decodeError.
func FuzzDecodeAny(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":[true,false,null],"c":{"d":"e\\n\\u00e9\\ud83d\\ude00"},"n":-1.5e+3}`,
		` {} `, `[]`, `"x"`, `0`, `-0.0`, `1e5`, `01`, `1.`, `.5`, `-`, `{"a":1,}`, `[1,]`, `{"a" 1}`,
		`"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, "\"\xff\"", "\"\x01\"", `"\x"`, `nul`, `truex`,
		`{"a":1}{}`, `{"a":{"a":{"a":[[[[1]]]]}}}`, `{"dup":1,"dup":2}`, "\t\n\r 1 \n",
		`1e-400`, `[-2e-324, 4.9e-324]`, `0.0e-999`, `"\ud83d\ude80"`, `"\ud83d"`, `"\ude80\ud83d"`, `"\ud83d\u0041"`, "\"\xed\xa0\x80\"", "\"a\xc3\"",
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := decodeAny(s)
		dec := json.NewDecoder(bytes.NewReader([]byte(s)))
		dec.UseNumber()
		var want any
		werr := dec.Decode(&want)
		if !json.Valid([]byte(s)) {
			// One value and nothing after it, as decodeAny wants.
			werr = errSyntax
		}
		if werr == nil && (!utf8.ValidString(s) || loneSurrogateIn(s) || nesting(s) > MaxDepth || underflowIn(want)) {
			var de *decodeError
			if !errors.As(err, &de) {
				t.Fatalf("%q: decodeAny error %v, want a *decodeError", s, err)
			}
			return
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: decodeAny error %v, encoding/json error %v", s, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeAny %#v, encoding/json %#v", s, got, want)
		}
	})
}

// loneSurrogateIn reports whether valid JSON text s has a \u escape of a
// surrogate that is not half of a pair (an oracle written apart from the
// decoder: it walks the raw text).
func loneSurrogateIn(s string) bool {
	in := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"':
			in = !in
		case in && s[i] == '\\' && s[i+1] != 'u':
			i++
		case in && s[i] == '\\':
			r, _ := strconv.ParseUint(s[i+2:i+6], 16, 32)
			i += 5
			if !utf16.IsSurrogate(rune(r)) {
				continue
			}
			if r >= 0xdc00 || i+7 > len(s) || s[i+1:i+3] != `\u` {
				return true
			}
			lo, _ := strconv.ParseUint(s[i+3:i+7], 16, 32)
			if utf16.DecodeRune(rune(r), rune(lo)) == utf8.RuneError {
				return true
			}
			i += 6
		}
	}
	return false
}

// nesting is the deepest nesting of arrays and objects in valid JSON s.
func nesting(s string) int {
	in, depth, most := false, 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			in = !in
		case in && c == '\\':
			i++
		case !in && (c == '[' || c == '{'):
			depth++
			most = max(most, depth)
		case !in && (c == ']' || c == '}'):
			depth--
		}
	}
	return most
}

// underflowIn reports whether a value encoding/json decoded holds a
// number that is not zero but parses as zero (1e-400): the decoder
// refuses it, as validation and the tool would read two values.
func underflowIn(v any) bool {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		return err == nil && f == 0 && strings.ContainsAny(strings.SplitN(strings.ToLower(string(v)), "e", 2)[0], "123456789")
	case map[string]any:
		for _, e := range v {
			if underflowIn(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if underflowIn(e) {
				return true
			}
		}
	}
	return false
}
