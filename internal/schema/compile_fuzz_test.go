package schema

import (
	"encoding/json"
	"testing"
)

// FuzzCompile: schemas arrive from models and messages (workflow result
// schemas). Compiling any bytes, strict or not, never panics, never loads
// anything remote, and a schema that compiles sends valid JSON that
// compiles again.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","pattern":"^x"},"b":{"type":"integer","minimum":1}},"required":["a"]}`,
		`{"type":"object","properties":{"r":{"$ref":"#/$defs/r"}},"$defs":{"r":{"type":"object","properties":{"x":{"enum":["a","b"]}}}}}`,
		`{"type":"object","properties":{"u":{"$ref":"https://example.com/s.json"}}}`,
		`{"type":"object","properties":{"o":{"type":"object","additionalProperties":true}}}`,
		`{"type":"array"}`, `{"properties":{}}`, `true`, `{`, `{"type":"object","properties":{"c":{"const":1}}}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, strict bool) {
		p, err := Compile(raw, strict)
		if err != nil {
			return
		}
		if !json.Valid(p.Sent()) {
			t.Fatalf("sent schema is not JSON: %s", p.Sent())
		}
		if _, err := Compile(p.Sent(), false); err != nil {
			t.Fatalf("sent schema %s does not compile: %v", p.Sent(), err)
		}
	})
}
