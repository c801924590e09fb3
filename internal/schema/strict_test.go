package schema_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/schema"
)

// TestStrictTransform: input schema → the schema sent to the provider in
// strict mode. Every object is closed and lists all its properties in
// required, in property order; a property that was optional becomes
// nullable, keeping every other keyword.
func TestStrictTransform(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" means byte-identical to the (compacted) input
	}{
		{
			name: "optional becomes nullable, property order kept",
			in:   `{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer","minimum":1,"maximum":9}},"required":["zeta"]}`,
			want: `{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":["integer","null"],"minimum":1,"maximum":9}},"required":["zeta","alpha"],"additionalProperties":false}`,
		},
		{
			name: "optional enum gets null",
			in:   `{"type":"object","properties":{"sort":{"type":"string","enum":["asc","desc"]}}}`,
			want: `{"type":"object","properties":{"sort":{"type":["string","null"],"enum":["asc","desc",null]}},"additionalProperties":false,"required":["sort"]}`,
		},
		{
			name: "optional type list gets null",
			in:   `{"type":"object","properties":{"id":{"type":["string","integer"]}}}`,
			want: `{"type":"object","properties":{"id":{"type":["string","integer","null"]}},"additionalProperties":false,"required":["id"]}`,
		},
		{
			name: "already nullable optional is listed as required, unchanged",
			in:   `{"type":"object","properties":{"note":{"type":["string","null"]}},"additionalProperties":false}`,
			want: `{"type":"object","properties":{"note":{"type":["string","null"]}},"additionalProperties":false,"required":["note"]}`,
		},
		{
			name: "nested objects",
			in:   `{"type":"object","properties":{"window":{"type":"object","properties":{"from":{"type":"string","format":"date"},"days":{"type":"integer"}},"required":["from"]}},"required":["window"]}`,
			want: `{"type":"object","properties":{"window":{"type":"object","properties":{"from":{"type":"string","format":"date"},"days":{"type":["integer","null"]}},"required":["from","days"],"additionalProperties":false}},"required":["window"],"additionalProperties":false}`,
		},
		{
			name: "optional nested object",
			in:   `{"type":"object","properties":{"opt":{"type":"object","properties":{"a":{"type":"string"}}}}}`,
			want: `{"type":"object","properties":{"opt":{"type":["object","null"],"properties":{"a":{"type":["string","null"]}},"additionalProperties":false,"required":["a"]}},"additionalProperties":false,"required":["opt"]}`,
		},
		{
			name: "arrays of objects",
			in:   `{"type":"object","properties":{"rows":{"type":"array","minItems":1,"items":{"type":"object","properties":{"id":{"type":"string"},"score":{"type":"number","maximum":1}},"required":["id"]}}},"required":["rows"]}`,
			want: `{"type":"object","properties":{"rows":{"type":"array","minItems":1,"items":{"type":"object","properties":{"id":{"type":"string"},"score":{"type":["number","null"],"maximum":1}},"required":["id","score"],"additionalProperties":false}}},"required":["rows"],"additionalProperties":false}`,
		},
		{
			name: "object without properties is closed",
			in:   `{"type":"object","properties":{"opts":{"type":"object"}},"required":["opts"]}`,
			want: `{"type":"object","properties":{"opts":{"type":"object","properties":{},"additionalProperties":false,"required":[]}},"required":["opts"],"additionalProperties":false}`,
		},
		{
			name: "empty root",
			in:   `{"type":"object"}`,
			want: `{"type":"object","properties":{},"additionalProperties":false,"required":[]}`,
		},
		{
			name: "optional $ref wrapped in anyOf, definition closed",
			in:   `{"type":"object","$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}},"properties":{"at":{"$ref":"#/$defs/pt"}}}`,
			want: `{"type":"object","$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"],"additionalProperties":false}},"properties":{"at":{"anyOf":[{"$ref":"#/$defs/pt"},{"type":"null"}]}},"additionalProperties":false,"required":["at"]}`,
		},
		{
			name: "required $ref kept",
			in:   `{"type":"object","definitions":{"id":{"type":"string"}},"properties":{"id":{"$ref":"#/definitions/id"}},"required":["id"],"additionalProperties":false}`,
			want: "",
		},
		{
			name: "optional anyOf wrapped, branches closed",
			in:   `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"object","properties":{"n":{"type":"integer"}}}]}}}`,
			want: `{"type":"object","properties":{"v":{"anyOf":[{"anyOf":[{"type":"string"},{"type":"object","properties":{"n":{"type":["integer","null"]}},"additionalProperties":false,"required":["n"]}]},{"type":"null"}]}},"additionalProperties":false,"required":["v"]}`,
		},
		{
			name: "optional const wrapped",
			in:   `{"type":"object","properties":{"v":{"type":"string","const":"v1"}}}`,
			want: `{"type":"object","properties":{"v":{"anyOf":[{"type":"string","const":"v1"},{"type":"null"}]}},"additionalProperties":false,"required":["v"]}`,
		},
		{
			name: "already strict sent byte for byte",
			in:   `{"type":"object","description":"R\u00e9sum\u00e9 <b> & a\/b","properties":{"b":{"type":"string","pattern":"^\\d+$"},"a":{"type":["integer","null"],"minimum":1.0}},"required":["b","a"],"additionalProperties":false}`,
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, tt.in, true)
			want := tt.want
			if want == "" {
				want = tt.in
			}
			if string(p.Sent()) != want {
				t.Errorf("sent:\ngot  %s\nwant %s", p.Sent(), want)
			}
			if string(p.Full()) != tt.in {
				t.Errorf("full schema changed:\ngot  %s\nwant %s", p.Full(), tt.in)
			}
			// The sent schema is a schema too.
			if _, err := schema.Compile(p.Sent(), false); err != nil {
				t.Errorf("the sent schema does not compile: %v", err)
			}
		})
	}
}

func TestStrictPassThroughGolden(t *testing.T) {
	raw := compact(t, readFile(t, "testdata/passthrough/strict-ready.json"))
	p := mustCompile(t, string(raw), true)
	if string(p.Sent()) != string(raw) {
		t.Errorf("an already strict schema was rewritten:\ngot  %s\nwant %s", p.Sent(), raw)
	}
}

func TestStrictRefusals(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // substrings of the error
	}{
		{"additionalProperties true", `{"type":"object","properties":{},"additionalProperties":true}`,
			[]string{"the root schema", "additional properties"}},
		{"additionalProperties schema", `{"type":"object","additionalProperties":{"type":"string"}}`,
			[]string{"the root schema", "additional properties"}},
		{"nested additionalProperties", `{"type":"object","properties":{"meta":{"type":"object","additionalProperties":{}}}}`,
			[]string{"#/properties/meta", "additional properties"}},
		{"untyped property", `{"type":"object","properties":{"any":{"description":"Anything."}}}`,
			[]string{"#/properties/any", "no type"}},
		{"any value", `{"type":"object","properties":{"v":true}}`,
			[]string{"#/properties/v", "any value"}},
		{"untyped items", `{"type":"object","properties":{"rows":{"type":"array","items":{}}}}`,
			[]string{"#/properties/rows/items", "no type"}},
		{"oneOf", `{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`,
			[]string{"#/properties/v", `"oneOf"`}},
		{"allOf", `{"type":"object","allOf":[{"required":["a"]}]}`,
			[]string{"the root schema", `"allOf"`}},
		{"not", `{"type":"object","properties":{"v":{"not":{"type":"null"}}}}`,
			[]string{"#/properties/v", `"not"`}},
		{"if then else", `{"type":"object","if":{"required":["a"]},"then":{"required":["b"]}}`,
			[]string{`"if"`}},
		{"patternProperties", `{"type":"object","patternProperties":{"^x-":{"type":"string"}}}`,
			[]string{`"patternProperties"`}},
		{"dependentRequired", `{"type":"object","dependentRequired":{"a":["b"]}}`,
			[]string{`"dependentRequired"`}},
		{"unevaluatedProperties", `{"type":"object","unevaluatedProperties":false}`,
			[]string{`"unevaluatedProperties"`}},
		{"propertyNames", `{"type":"object","propertyNames":{"maxLength":3}}`,
			[]string{`"propertyNames"`}},
		{"prefixItems", `{"type":"object","properties":{"t":{"type":"array","prefixItems":[{"type":"string"}]}}}`,
			[]string{"#/properties/t", `"prefixItems"`}},
		{"contains", `{"type":"object","properties":{"t":{"type":"array","contains":{"const":1}}}}`,
			[]string{"#/properties/t", `"contains"`}},
		{"inside array items", `{"type":"object","properties":{"rows":{"type":"array","items":{"oneOf":[{"type":"string"}]}}}}`,
			[]string{"#/properties/rows/items", `"oneOf"`}},
		{"inside a definition", `{"type":"object","$defs":{"d":{"allOf":[{"type":"object"}]}},"properties":{"x":{"$ref":"#/$defs/d"}}}`,
			[]string{"#/$defs/d", `"allOf"`}},
		{"inside anyOf", `{"type":"object","properties":{"x":{"anyOf":[{"type":"object","additionalProperties":true}]}}}`,
			[]string{"#/properties/x/anyOf/0", "additional properties"}},
		{"escaped property name", `{"type":"object","properties":{"a/b":{"not":{}}}}`,
			[]string{"#/properties/a~1b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Without strict, the same schema is fine: it is sent as given.
			if _, err := schema.Compile(json.RawMessage(tt.in), false); err != nil {
				t.Fatalf("non-strict Compile: %v", err)
			}
			_, err := schema.Compile(json.RawMessage(tt.in), true)
			if err == nil {
				t.Fatal("strict Compile accepted the schema")
			}
			for _, w := range append([]string{"cannot be made strict"}, tt.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// strictArgs has optional fields at every level a null can appear.
const strictArgs = `{
  "type": "object",
  "properties": {
    "path":   {"type": "string"},
    "depth":  {"type": "integer", "minimum": 0, "maximum": 5},
    "mode":   {"type": "string", "enum": ["fast", "full"]},
    "note":   {"type": ["string", "null"]},
    "window": {"type": "object", "properties": {"from": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}, "required": ["from"]},
    "rows":   {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}, "score": {"type": "number"}}, "required": ["id"]}},
    "tags":   {"type": "array", "items": {"type": "string"}}
  },
  "required": ["path", "note"]
}`

func TestStrictNulls(t *testing.T) {
	strict := mustCompile(t, strictArgs, true)
	plain := mustCompile(t, strictArgs, false)
	tests := []struct {
		name string
		args string
		want string // the arguments after null stripping; "" means rejected
		ptrs []string
	}{
		{name: "optional nulls mean absent",
			args: `{"path":"/a","depth":null,"mode":null,"note":null,"window":null,"rows":null,"tags":null}`,
			want: `{"path":"/a","note":null}`},
		{name: "null kept where the full schema allows it",
			args: `{"path":"/a","note":null}`,
			want: `{"path":"/a","note":null}`},
		{name: "nested object",
			args: `{"path":"/a","note":"n","window":{"from":"x","days":null}}`,
			want: `{"path":"/a","note":"n","window":{"from":"x"}}`},
		{name: "arrays of objects",
			args: `{"path":"/a","note":null,"rows":[{"id":"r1","score":null},{"id":"r2","score":0.5}]}`,
			want: `{"path":"/a","note":null,"rows":[{"id":"r1"},{"id":"r2","score":0.5}]}`},
		{name: "values untouched",
			args: `{"path":"/a","note":"n","depth":2,"mode":"full","tags":["x"]}`,
			want: `{"path":"/a","note":"n","depth":2,"mode":"full","tags":["x"]}`},
		{name: "required non-nullable null is a violation",
			args: `{"path":null,"note":null}`, ptrs: []string{"/path"}},
		{name: "required nested null is a violation",
			args: `{"path":"/a","note":null,"window":{"from":null}}`, ptrs: []string{"/window/from"}},
		{name: "required field in array item null is a violation",
			args: `{"path":"/a","note":null,"rows":[{"id":null}]}`, ptrs: []string{"/rows/0/id"}},
		{name: "null array element is not an absent field",
			args: `{"path":"/a","note":null,"tags":[null]}`, ptrs: []string{"/tags/0"}},
		{name: "full schema still validates: minimum",
			args: `{"path":"/a","note":null,"depth":9}`, ptrs: []string{"/depth"}},
		{name: "full schema still validates: nested minimum",
			args: `{"path":"/a","note":null,"window":{"from":"x","days":0}}`, ptrs: []string{"/window/days"}},
		{name: "full schema still validates: enum without null",
			args: `{"path":"/a","note":null,"mode":"slow"}`, ptrs: []string{"/mode"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := strict.Parse(tt.args, schema.RepairOptions{})
			if tt.want == "" {
				vs := violationsOf(t, err)
				if ps := pointers(vs); strings.Join(ps, ",") != strings.Join(tt.ptrs, ",") {
					t.Errorf("violations at %v, want %v (%+v)", ps, tt.ptrs, vs)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !jsonEqual(t, got.JSON, []byte(tt.want)) {
				t.Errorf("JSON = %s, want %s", got.JSON, tt.want)
			}
		})
	}

	// Without strict, a null for an optional field is the model's mistake,
	// not a provider convention: it is validated as sent.
	_, err := plain.Parse(`{"path":"/a","note":null,"depth":null}`, schema.RepairOptions{})
	if ps := pointers(violationsOf(t, err)); strings.Join(ps, ",") != "/depth" {
		t.Errorf("non-strict null: violations at %v, want /depth", ps)
	}
}

// TestStrictInferredNulls: the same through a schema inferred from a type,
// ending in a decode into that type.
func TestStrictInferredNulls(t *testing.T) {
	p, err := schema.For[searchParams](true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Parse(`{"query":"go","limit":null,"sort":null,"site":null,"tags":null,"window":{"from":"2024-01-02","days":null},"exact":false}`, schema.RepairOptions{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var sp searchParams
	if err := json.Unmarshal(got.JSON, &sp); err != nil {
		t.Fatal(err)
	}
	if sp.Query != "go" || sp.Window == nil || sp.Window.From != "2024-01-02" || sp.Window.Days != 0 || sp.Limit != 0 {
		t.Errorf("decoded %+v (window %+v)", sp, sp.Window)
	}
	_, err = p.Parse(`{"query":"go","limit":500,"exact":false}`, schema.RepairOptions{})
	if ps := pointers(violationsOf(t, err)); strings.Join(ps, ",") != "/limit" {
		t.Errorf("strict inferred schema lost its maximum: violations at %v", ps)
	}
}

// TestStrictInexact: closing an open object changes what the schema
// accepts, so strict mode does not express it exactly.
func TestStrictInexact(t *testing.T) {
	for raw, want := range map[string]string{
		`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`:                                          "",
		`{"type":"object","properties":{"a":{"type":"string"}}}`:                                                                       "the root schema",
		`{"type":"object","properties":{"r":{"type":"object"}},"additionalProperties":false}`:                                          "#/properties/r",
		`{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{}}}},"additionalProperties":false}`: "#/properties/l/items",
		// An optional property where no null plan reaches: strict makes it
		// required and nullable, and the full schema refuses the null.
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"required":["a"],"additionalProperties":false,"$defs":{"x":{"type":"object","properties":{"y":{"type":"string"}},"additionalProperties":false}}}`: "#/$defs/x/properties/y",
		`{"type":"object","properties":{"a":{"anyOf":[{"type":"object","properties":{"y":{"type":"string"}},"additionalProperties":false},{"type":"string"}]}},"required":["a"],"additionalProperties":false}`:      "#/properties/a/anyOf/0/properties/y",
		`{"type":"object","properties":{"a":{"anyOf":[{"type":"object","properties":{"y":{"type":"string"}},"required":["y"],"additionalProperties":false},{"type":"null"}]}},"additionalProperties":false}`:        "",
	} {
		p, err := schema.Compile(json.RawMessage(raw), true)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		got := p.StrictInexact()
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("StrictInexact(%s) = %q, want one naming %q", raw, got, want)
		}
	}
}
