package schema

import (
	"bytes"
	"encoding/json"
	"testing"
)

// fastSchemas use every keyword the fast validator handles.
var fastSchemas = []string{
	`{"type":"object","properties":{"query":{"type":"string","minLength":1,"maxLength":20,"pattern":"^[a-z ]+$"},"limit":{"type":"integer","minimum":1,"maximum":50},"ratio":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},"sort":{"type":"string","enum":["relevance","date"]},"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3},"window":{"type":"object","properties":{"from":{"type":"string","format":"date"},"days":{"type":"integer","maximum":365}},"required":["from"],"additionalProperties":false},"flag":{"type":["boolean","null"]},"kind":{"const":"x"}},"required":["query"],"additionalProperties":false}`,
	`{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"integer"}},"any":{},"no":false,"e":{"enum":[1,"1",[1],{"a":1},null,true]}}}`,
	`{"type":"object","properties":{"n":{"type":"number","minimum":1e2,"maximum":12345678901234567890}}}`,
}

// FuzzFastAgrees: the fast validator and the general one accept and
// refuse the same values, and point at the same places.
func FuzzFastAgrees(f *testing.F) {
	for _, s := range []string{
		`{"query":"hello world","limit":5,"ratio":0.5,"sort":"date","tags":["a"],"window":{"from":"2024-01-31","days":3},"flag":null,"kind":"x"}`,
		`{"query":"","limit":0,"ratio":1,"sort":"size","tags":[],"window":{"from":"2024-13-45","days":400,"x":1},"flag":"no","kind":"y","extra":1}`,
		`{"query":"Q1","limit":1.0,"ratio":0,"tags":["a","b","c","d"],"window":{}}`,
		`{"m":{"a":1,"b":"x"},"any":[1,{}],"e":[1.0]}`, `{"no":1}`, `{"e":{"a":1.00}}`,
		`{"n":99.999}`, `{"n":12345678901234567891}`, `{"n":1e2}`, `[]`, `"x"`, `{"query":"ab","limit":2e1}`,
	} {
		for i := range fastSchemas {
			f.Add(i, s)
		}
	}
	params := make([]*Params, len(fastSchemas))
	for i, s := range fastSchemas {
		p, err := Compile(json.RawMessage(s), false)
		if err != nil {
			f.Fatal(err)
		}
		if p.fast == nil {
			f.Fatalf("schema %d does not compile to the fast validator", i)
		}
		params[i] = p
	}
	f.Fuzz(func(t *testing.T, i int, doc string) {
		if i < 0 {
			i = -i
		}
		p := params[i%len(params)]
		dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil || hasUnusableNumber(v) {
			return
		}
		fast := p.fast.validate(v, &path{tokens: make([]pathToken, 0, 8)}, nil)
		full := p.validateFull(v)
		if (fast == nil) != (full == nil) {
			t.Fatalf("schema %d, %s: fast says %v, library says %v", i%len(params), doc, fast, full)
		}
		if full == nil {
			return
		}
		want := map[string]bool{}
		for _, v := range full.(*ValidationError).Violations {
			want[v.Pointer] = true
		}
		got := map[string]bool{}
		for _, v := range fast {
			got[v.Pointer] = true
		}
		for ptr := range want {
			// The library drops the token of an empty key ("/m" for the
			// key "" in m, where RFC 6901 says "/m/"); the fast one keeps it.
			if !got[ptr] && !got[ptr+"/"] {
				t.Fatalf("schema %d, %s: library points at %q, fast does not: %v vs %v", i%len(params), doc, ptr, fast, full)
			}
		}
	})
}
