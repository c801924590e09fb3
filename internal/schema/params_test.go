package schema_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"

	"github.com/agentbull/toolruntime/internal/schema"
)

// golden compares got with testdata/name (see internal/golden).
var golden = goldenfile.Bytes

// pretty indents compact JSON for a golden file. Indenting keeps key order
// and every byte of every token, so equal golden files mean byte-identical
// compact JSON.
func pretty(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		t.Fatalf("indent %s: %v", raw, err)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

func compact(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %s: %v", raw, err)
	}
	return b.Bytes()
}

func mustCompile(t *testing.T, raw string, strict bool) *schema.Params {
	t.Helper()
	p, err := schema.Compile(json.RawMessage(raw), strict)
	if err != nil {
		t.Fatalf("Compile(%s, strict=%v): %v", raw, strict, err)
	}
	return p
}

// TestCompilePassThrough: a raw schema is sent exactly as written (after
// compaction), every keyword kept, escapes and key order included.
func TestCompilePassThrough(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "passthrough", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no pass-through inputs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want := compact(t, raw)
			p, err := schema.Compile(raw, false)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if !bytes.Equal(p.Sent(), want) {
				t.Errorf("Sent() changed the schema:\ngot  %s\nwant %s", p.Sent(), want)
			}
			if !bytes.Equal(p.Full(), want) {
				t.Errorf("Full() changed the schema:\ngot  %s\nwant %s", p.Full(), want)
			}
		})
	}
}

// TestCompileKeepsKeywords spells out the keywords the pass-through golden
// input carries, so that trimming the input cannot silently weaken the test.
func TestCompileKeepsKeywords(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "passthrough", "keywords.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := mustCompile(t, string(raw), false)
	for _, kw := range []string{
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
		"pattern", "format", "enum", "const", "minLength", "maxLength", "minItems",
		"maxItems", "uniqueItems", "contains", "default", "examples", "title",
		"description", "$comment", "deprecated", "readOnly", "additionalProperties",
		"propertyNames", "maxProperties", "patternProperties", "oneOf", "allOf",
		"not", "$ref", "$defs", "dependentRequired", "if", "then", "contentEncoding",
		"contentMediaType", "x-vendor",
	} {
		if !bytes.Contains(p.Sent(), []byte(`"`+kw+`":`)) {
			t.Errorf("keyword %s missing from the sent schema", kw)
		}
	}
	for _, esc := range []string{`caf\u00e9`, `a\/b`, `2.50`, `1e3`, `"^[^\\s].*$"`} {
		if !bytes.Contains(p.Sent(), []byte(esc)) {
			t.Errorf("%s was rewritten in the sent schema", esc)
		}
	}
}

// TestCompileValidatesWithEveryKeyword: keywords that were passed through
// also constrain the arguments.
func TestCompileValidatesWithEveryKeyword(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "passthrough", "keywords.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := mustCompile(t, string(raw), false)
	const valid = "valid"
	tests := []struct {
		args string
		ptr  string // where the violation is, or valid
	}{
		{`{"query":"ok"}`, valid},
		{`{"query":" leading space"}`, "/query"},
		{`{"query":"ok","limit":51}`, "/limit"},
		{`{"query":"ok","limit":5,"ratio":0.3}`, "/ratio"},
		{`{"query":"ok","limit":5,"ratio":0.5}`, valid},
		{`{"query":"ok","ratio":0.5}`, ""}, // dependentRequired: limit
		{`{"query":"ok","email":"not an email"}`, "/email"},
		{`{"query":"ok","sort":"size"}`, "/sort"},
		{`{"query":"ok","sort":"date"}`, ""}, // if/then: when
		{`{"query":"ok","sort":"date","when":"2024-05-06T07:08:09Z"}`, valid},
		{`{"query":"ok","version":3}`, "/version"},
		{`{"query":"ok","tags":["x","x"]}`, "/tags"},
		{`{"query":"ok","tags":["a"]}`, "/tags"}, // contains
		{`{"query":"ok","meta":{"Key":"v"}}`, "/meta"},
		{`{"query":"ok","labels":{"x-a":1}}`, "/labels/x-a"},
		{`{"query":"ok","target":{"x":1}}`, "/target"},
		{`{"query":"ok","target":{"x":1,"y":2}}`, valid},
		{`{"query":"ok","both":""}`, "/both"},
	}
	for _, tt := range tests {
		_, err := p.Parse(tt.args, schema.RepairOptions{})
		if tt.ptr == valid {
			if err != nil {
				t.Errorf("%s: unexpected error %v", tt.args, err)
			}
			continue
		}
		var ve *schema.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: got %v, want a violation at %q", tt.args, err, tt.ptr)
			continue
		}
		found := false
		for _, v := range ve.Violations {
			if v.Pointer == tt.ptr || (tt.ptr != "" && strings.HasPrefix(v.Pointer, tt.ptr+"/")) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: violations %+v, want one at %q", tt.args, ve.Violations, tt.ptr)
		}
	}
}

func TestCompileRefusesNonObjectRoot(t *testing.T) {
	for _, raw := range []string{
		`{"type":"string"}`,
		`{"type":"array","items":{"type":"object"}}`,
		`{"type":["string","null"]}`,
		`{}`,
		`{"anyOf":[{"type":"object"}]}`,
		`[]`,
		`true`,
		`"object"`,
		`null`,
	} {
		for _, strict := range []bool{false, true} {
			_, err := schema.Compile(json.RawMessage(raw), strict)
			if !errors.Is(err, schema.ErrNotObject) {
				t.Errorf("Compile(%s, strict=%v) = %v, want ErrNotObject", raw, strict, err)
			}
		}
	}
	for _, raw := range []string{
		`{"type":"object"}`,
		`{"properties":{"a":{"type":"string"}}}`,
		`{"type":["object","null"]}`,
	} {
		if _, err := schema.Compile(json.RawMessage(raw), false); err != nil {
			t.Errorf("Compile(%s) = %v, want it accepted", raw, err)
		}
	}
}

func TestCompileRefusesUnusableSchemas(t *testing.T) {
	tests := []struct{ name, raw, want string }{
		{"not JSON", `{"type":"object"`, "not valid JSON"},
		{"trailing data", `{"type":"object"} {}`, "not valid JSON"},
		{"bad keyword value", `{"type":"object","properties":{"a":{"minimum":"one"}}}`, "not usable"},
		{"unknown type", `{"type":"object","properties":{"a":{"type":"text"}}}`, "not usable"},
		{"remote ref", `{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}`, "not allowed"},
		{"file ref", `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`, "not allowed"},
		{"dangling ref", `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`, "not usable"},
		// The validator cannot compare against such numbers without
		// panicking (exponent past 1e6) or spending seconds.
		{"huge const", `{"type":"object","properties":{"a":{"const":1e1000001}}}`, "#/properties/a/const is out of the supported range"},
		{"huge enum", `{"type":"object","properties":{"a":{"enum":[1, 1e999999]}}}`, "#/properties/a/enum/1 is out of the supported range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := schema.Compile(json.RawMessage(tt.raw), false)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// Parameter types for inference. Field order is the order models see.
type searchParams struct {
	Query  string   `json:"query" jsonschema:"description=What to search for.,minLength=1,maxLength=200"`
	Limit  int      `json:"limit,omitempty" jsonschema:"description=How many results to return.,minimum=1,maximum=50"`
	Sort   string   `json:"sort,omitempty" jsonschema:"enum=relevance,enum=date"`
	Site   string   `json:"site,omitempty" jsonschema:"pattern=^[a-z0-9.-]+$,format=hostname"`
	Tags   []string `json:"tags,omitempty" jsonschema:"maxItems=5"`
	Window *window  `json:"window,omitempty" jsonschema:"description=Only results in this window."`
	Exact  bool     `json:"exact"`
}

type window struct {
	From string `json:"from" jsonschema:"format=date"`
	Days int    `json:"days,omitempty" jsonschema:"minimum=1,maximum=365"`
}

type batchParams struct {
	Items []batchItem `json:"items" jsonschema:"minItems=1"`
	Note  string      `json:"note,omitempty"`
}

type batchItem struct {
	ID    string  `json:"id" jsonschema:"pattern=^[a-z]+-[0-9]+$"`
	Score float64 `json:"score,omitempty" jsonschema:"minimum=0,maximum=1"`
}

type emptyParams struct{}

func TestForGolden(t *testing.T) {
	tests := []struct {
		name  string
		infer func(strict bool) (*schema.Params, error)
	}{
		{"search", schema.For[searchParams]},
		{"batch", schema.For[batchParams]},
		{"empty", schema.For[emptyParams]},
		{"pointer", schema.For[*window]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.infer(false)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.Sent(), p.Full()) {
				t.Errorf("a non-strict inferred schema is sent as inferred:\nsent %s\nfull %s", p.Sent(), p.Full())
			}
			golden(t, filepath.Join("infer", tt.name+".json"), pretty(t, p.Full()))
			s, err := tt.infer(true)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(s.Full(), p.Full()) {
				t.Errorf("strict changed the full schema:\nstrict %s\nplain  %s", s.Full(), p.Full())
			}
			golden(t, filepath.Join("infer", tt.name+".strict.json"), pretty(t, s.Sent()))
		})
	}
}

// TestForTags checks the struct tags the golden files rely on, one by one.
func TestForTags(t *testing.T) {
	p, err := schema.For[searchParams](false)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
		Additional *bool                     `json:"additionalProperties"`
	}
	if err := json.Unmarshal(p.Full(), &s); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		prop, kw string
		want     any
	}{
		{"query", "description", "What to search for."},
		{"query", "minLength", 1.0},
		{"limit", "minimum", 1.0},
		{"limit", "maximum", 50.0},
		{"limit", "type", "integer"},
		{"sort", "enum", []any{"relevance", "date"}},
		{"site", "pattern", "^[a-z0-9.-]+$"},
		{"site", "format", "hostname"},
		{"tags", "maxItems", 5.0},
		{"exact", "type", "boolean"},
	}
	for _, c := range checks {
		if got := s.Properties[c.prop][c.kw]; !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s.%s = %#v, want %#v", c.prop, c.kw, got, c.want)
		}
	}
	if want := []string{"query", "exact"}; !reflect.DeepEqual(s.Required, want) {
		t.Errorf("required = %v, want %v (fields without omitempty)", s.Required, want)
	}
	if s.Additional == nil || *s.Additional {
		t.Errorf("additionalProperties = %v, want false", s.Additional)
	}
	keys := propertyOrder(t, p.Full())
	if want := []string{"query", "limit", "sort", "site", "tags", "window", "exact"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("property order = %v, want field order %v", keys, want)
	}
}

// propertyOrder returns the keys of the root "properties" in document order.
func propertyOrder(t *testing.T, raw []byte) []string {
	t.Helper()
	var s struct {
		Properties json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(s.Properties))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

type cachedParams struct {
	A string `json:"a"`
}

type racedParams struct {
	B int `json:"b"`
}

func TestForCaches(t *testing.T) {
	p1, err := schema.For[cachedParams](false)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := schema.For[cachedParams](false)
	if p1 != p2 {
		t.Errorf("For returned %p then %p: the schema is not cached", p1, p2)
	}
	s1, _ := schema.For[cachedParams](true)
	s2, _ := schema.For[cachedParams](true)
	if s1 != s2 {
		t.Errorf("For(strict) returned %p then %p: the schema is not cached", s1, s2)
	}
	if s1 == p1 {
		t.Error("strict and non-strict share one cache entry")
	}

	// First calls racing on a type not seen yet still agree on one pointer.
	const n = 8
	got := make([]*schema.Params, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], _ = schema.For[racedParams](false)
		})
	}
	close(start)
	wg.Wait()
	for i := range got {
		if got[i] == nil || got[i] != got[0] {
			t.Fatalf("concurrent first calls returned different schemas: %p", got)
		}
	}
}

func TestForRefusesNonStruct(t *testing.T) {
	for name, infer := range map[string]func(bool) (*schema.Params, error){
		"int":    schema.For[int],
		"string": schema.For[string],
		"slice":  schema.For[[]searchParams],
		"map":    schema.For[map[string]any],
	} {
		if _, err := infer(false); !errors.Is(err, schema.ErrNotObject) {
			t.Errorf("For[%s] = %v, want ErrNotObject", name, err)
		}
	}
}

func violationsOf(t *testing.T, err error) []schema.Violation {
	t.Helper()
	var ve *schema.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v (%T), want a *ValidationError", err, err)
	}
	return ve.Violations
}

func pointers(vs []schema.Violation) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Pointer
	}
	return out
}

func TestViolationsListEveryPointer(t *testing.T) {
	p, err := schema.For[searchParams](false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := schema.For[batchParams](false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		p      *schema.Params
		args   string
		want   []string // pointers, in any order
		substr []string // one per pointer, same order
	}{
		{"two bad fields", p, `{"query":"q","exact":true,"limit":0,"sort":"size"}`,
			[]string{"/limit", "/sort"}, []string{">= 1", "relevance"}},
		{"missing required", p, `{"limit":5}`,
			[]string{""}, []string{"missing properties"}},
		{"unknown field", p, `{"query":"q","exact":false,"colour":"red"}`,
			[]string{""}, []string{"colour"}},
		{"wrong type", p, `{"query":7,"exact":"yes"}`,
			[]string{"/query", "/exact"}, []string{"string", "boolean"}},
		{"nested", p, `{"query":"q","exact":true,"window":{"from":"2024-13-45","days":400}}`,
			[]string{"/window/from", "/window/days"}, []string{"date", "<= 365"}},
		{"array item", p, `{"query":"q","exact":true,"tags":["a",3]}`,
			[]string{"/tags/1"}, []string{"string"}},
		{"array of objects", b, `{"items":[{"id":"a-1"},{"id":"B","score":2}]}`,
			[]string{"/items/1/id", "/items/1/score"}, []string{"pattern", "<= 1"}},
		{"not an object", p, `[1,2]`, []string{""}, []string{"object"}},
		{"huge number", p, `{"query":"q","exact":true,"limit":1e1000001}`,
			[]string{"/limit"}, []string{"out of the supported range"}},
		{"long number", p, `{"query":"q","exact":true,"limit":1` + strings.Repeat("0", 400) + `}`,
			[]string{"/limit"}, []string{"out of the supported range"}},
		// Which of two values counts is up to whoever reads the text (a
		// tool forwarding it may take the first): refused, not guessed.
		{"duplicate key", p, `{"query":"q","exact":true,"limit":"x","limit":1}`,
			[]string{"/limit"}, []string{"more than once"}},
		{"duplicate key, nested", b, `{"items":[{"id":"a-1"},{"id":"a-2","id":"a-3"}]}`,
			[]string{"/items/1/id"}, []string{"more than once"}},
		{"duplicate key after repair", p, "```json\n{\"query\":\"q\",\"exact\":true,\"exact\":false}\n```",
			[]string{"/exact"}, []string{"more than once"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.p.Parse(tt.args, schema.RepairOptions{})
			vs := violationsOf(t, err)
			got := map[string]string{}
			for _, v := range vs {
				got[v.Pointer] += v.Message + ";"
				if len(v.Message) > 120 || strings.Contains(v.Message, "\n") {
					t.Errorf("message for %s is not short: %q", v.Pointer, v.Message)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("violations at %v, want exactly %v (%+v)", pointers(vs), tt.want, vs)
			}
			for i, ptr := range tt.want {
				msg, ok := got[ptr]
				if !ok {
					t.Errorf("no violation at %q; got %+v", ptr, vs)
					continue
				}
				if !strings.Contains(msg, tt.substr[i]) {
					t.Errorf("violation at %q is %q, want it to mention %q", ptr, msg, tt.substr[i])
				}
			}
		})
	}
}

func TestValidationErrorText(t *testing.T) {
	err := &schema.ValidationError{Violations: []schema.Violation{
		{Pointer: "", Message: "missing properties: 'a'"},
		{Pointer: "/b", Message: "must be <= 5 but found 6"},
	}}
	want := "(root): missing properties: 'a'; /b: must be <= 5 but found 6"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

func TestParse(t *testing.T) {
	p, err := schema.For[searchParams](false)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := schema.For[struct {
		Limit int     `json:"limit,omitempty"`
		Ratio float64 `json:"ratio,omitempty"`
	}](false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		p      *schema.Params
		args   string
		want   string // decoded value must equal this JSON
		exact  bool   // the returned bytes must equal want
		rungs  []string
		errStr string
	}{
		{name: "valid as sent", p: p, args: `{"query":"go","exact":true}`, want: `{"query":"go","exact":true}`, exact: true},
		{name: "whitespace trimmed", p: p, args: " \n{\"query\":\"go\",\"exact\":true}\n ", want: `{"query":"go","exact":true}`, exact: true},
		{name: "empty means {}", p: opt, args: ``, want: `{}`, exact: true},
		{name: "blank means {}", p: opt, args: " \t\n", want: `{}`, exact: true},
		{name: "empty still validated", p: p, args: ``, errStr: "missing properties"},
		{name: "fenced", p: p, args: "```json\n{\"query\":\"go\",\"exact\":true}\n```", want: `{"query":"go","exact":true}`, rungs: []string{schema.RungStripFences}},
		{name: "truncated is refused", p: p, args: `{"query":"go","exact":true,"tags":["a"`, errStr: "cut off at byte 38"},
		{name: "double encoded", p: p, args: `"{\"query\":\"go\",\"exact\":true}"`, want: `{"query":"go","exact":true}`, rungs: []string{schema.RungDoubleEncoded}},
		{name: "a string is no object", p: p, args: `"go"`, errStr: "(root)"},
		{name: "trailing comma", p: p, args: `{"query":"go","exact":true,}`, want: `{"query":"go","exact":true}`, rungs: []string{schema.RungTrailingCommas}},
		{name: "integral numbers as written", p: opt, args: `{"limit":5.0,"ratio":1e0}`, want: `{"limit":5.0,"ratio":1e0}`, exact: true},
		{name: "exponent integer as written", p: opt, args: `{"limit":2E1}`, want: `{"limit":2E1}`, exact: true},
		{name: "negative zero as written", p: opt, args: `{"ratio":-0.0}`, want: `{"ratio":-0.0}`, exact: true},
		{name: "fractions kept", p: opt, args: `{"ratio":2.50}`, want: `{"ratio":2.50}`, exact: true},
		{name: "fraction for an integer", p: opt, args: `{"limit":2.5}`, errStr: "/limit"},
		{name: "unparseable", p: p, args: `not json at all`, errStr: "no JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.p.Parse(tt.args, schema.RepairOptions{})
			if tt.errStr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errStr) {
					t.Fatalf("Parse = %s, %v; want an error containing %q", got.JSON, err, tt.errStr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if tt.exact && string(got.JSON) != tt.want {
				t.Errorf("JSON = %s, want exactly %s", got.JSON, tt.want)
			}
			if !jsonEqual(t, got.JSON, []byte(tt.want)) {
				t.Errorf("JSON = %s, want %s", got.JSON, tt.want)
			}
			if !reflect.DeepEqual(got.Repairs, tt.rungs) {
				t.Errorf("Repairs = %v, want %v", got.Repairs, tt.rungs)
			}
		})
	}
}

// TestParseDecodesIntoIntegers: whatever validates as an integer decodes
// into a Go int, with Bind and with Value.Unmarshal (the value is kept as
// written: 7.0 stays 7.0 in the JSON).
func TestParseDecodesIntoIntegers(t *testing.T) {
	p, err := schema.For[window](false)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{`{"from":"2024-01-02","days":7}`, `{"from":"2024-01-02","days":7.0}`, `{"from":"2024-01-02","days":0.7e1}`, `{"from":"2024-01-02","days":700e-2}`} {
		got, _, err := p.ParseValue(args, schema.RepairOptions{})
		if err != nil {
			t.Errorf("ParseValue(%s): %v", args, err)
			continue
		}
		var w, b window
		if err := got.Unmarshal(&w); err != nil || w.Days != 7 {
			t.Errorf("ParseValue(%s) unmarshals to %+v, %v; want days 7", args, w, err)
		}
		if ok, err := schema.Bind(got.V, &b); ok && (err != nil || b.Days != 7) {
			t.Errorf("ParseValue(%s) binds to %+v, %v; want days 7", args, b, err)
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("decode %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestViolationsOrder: the same arguments always give the same message,
// violations sorted by pointer, although the validator walks maps.
func TestViolationsOrder(t *testing.T) {
	p, err := schema.For[searchParams](false)
	if err != nil {
		t.Fatal(err)
	}
	args := `{"query":"","limit":0,"sort":"x","site":"UPPER","tags":[1,2,3,4,5,6],"window":{"from":1,"days":0},"exact":"no","extra":1}`
	_, err = p.Parse(args, schema.RepairOptions{})
	first := err.Error()
	want := []string{"", "/exact", "/limit", "/query", "/site", "/sort", "/tags", "/tags/0", "/tags/1", "/tags/2", "/tags/3", "/tags/4", "/tags/5", "/window/days", "/window/from"}
	if got := pointers(violationsOf(t, err)); !reflect.DeepEqual(got, want) {
		t.Errorf("pointers = %q, want %q", got, want)
	}
	for range 50 {
		_, err := p.Parse(args, schema.RepairOptions{})
		if err.Error() != first {
			t.Fatalf("violations changed between runs:\n%s\n%s", first, err)
		}
	}
}
