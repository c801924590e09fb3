package mcp

import (
	"encoding/json"
	"testing"
)

// FuzzWithDefaults: a person's input and a server's requested schema are
// untrusted bytes; withDefaults never panics, refuses what is not a JSON
// object, and keeps every field the input gave.
func FuzzWithDefaults(f *testing.F) {
	for _, s := range [][2]string{
		{`{"repo":"x"}`, `{"type":"object","properties":{"repo":{"type":"string"},"private":{"type":"boolean","default":true}}}`},
		{``, `{"properties":{"n":{"default":3}}}`},
		{`{}`, `{"properties":{"n":{"default":}}}`},
		{`[1]`, `{}`},
		{`null`, `null`},
		{`{"a":{"b":[1,2]}}`, `{"properties":[]}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, input, schema []byte) {
		got, err := withDefaults(input, schema)
		if err != nil {
			return
		}
		if got == nil {
			t.Fatal("no content and no error")
		}
		var in map[string]any
		if json.Unmarshal(input, &in) == nil {
			for k := range in {
				if _, ok := got[k]; !ok {
					t.Fatalf("field %q of the input was lost", k)
				}
			}
		}
		if _, err := json.Marshal(got); err != nil {
			t.Fatalf("the content does not encode: %v", err)
		}
	})
}
