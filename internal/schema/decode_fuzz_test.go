package schema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeAny: the hot-path parser accepts exactly what encoding/json
// accepts and produces the same values.
func FuzzDecodeAny(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":[true,false,null],"c":{"d":"e\\n\\u00e9\\ud83d\\ude00"},"n":-1.5e+3}`,
		` {} `, `[]`, `"x"`, `0`, `-0.0`, `1e5`, `01`, `1.`, `.5`, `-`, `{"a":1,}`, `[1,]`, `{"a" 1}`,
		`"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, "\"\xff\"", "\"\x01\"", `"\x"`, `nul`, `truex`,
		`{"a":1}{}`, `{"a":{"a":{"a":[[[[1]]]]}}}`, `{"dup":1,"dup":2}`, "\t\n\r 1 \n",
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
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: decodeAny error %v, encoding/json error %v", s, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeAny %#v, encoding/json %#v", s, got, want)
		}
	})
}
