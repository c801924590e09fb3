package console

import (
	"encoding/json"
	"net/url"
	"testing"
)

// FuzzInputForm: any requested schema (untrusted: an MCP server wrote
// it) gives a bounded list of fields, and any values typed into them
// give valid JSON or an error, never a panic.
func FuzzInputForm(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"repo":{"type":"string"},"n":{"type":"integer","default":3},"b":{"type":"boolean"},"k":{"type":"string","enum":["a","b"]}},"required":["repo"]}`), "x", "NaN")
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"array"}}}`), "[1]", "")
	f.Add([]byte(`null`), "{}", "1e400")
	f.Fuzz(func(t *testing.T, schema []byte, v1, v2 string) {
		fields := inputFields(schema)
		if len(fields) == 0 && !json.Valid(schema) || len(fields) > maxInputFields {
			t.Fatalf("%d fields from %q", len(fields), schema)
		}
		form := url.Values{"p.": {v1}}
		for i, fl := range fields {
			v := v1
			if i%2 == 1 {
				v = v2
			}
			form.Set("p."+fl.Name, v)
		}
		in, err := buildInput(fields, form, "p.")
		if err == nil && !json.Valid(in) {
			t.Fatalf("input %q is not JSON", in)
		}
	})
}
