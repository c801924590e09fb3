package schema

import (
	"encoding/json"
	"reflect"
	"testing"
)

type directInner struct {
	From string `json:"from" jsonschema:"format=date"`
	Days int    `json:"days,omitempty" jsonschema:"minimum=1,maximum=365"`
}

// directTarget uses every shape the direct parser takes: strings with
// bounds, patterns and enums, bounded integers, unsigned and float
// numbers, booleans, pointers, arrays and nested objects.
type directTarget struct {
	Query  string        `json:"query" jsonschema:"minLength=1,maxLength=20,pattern=^[a-z é]+$"`
	Limit  int8          `json:"limit,omitempty" jsonschema:"minimum=-5,maximum=100"`
	Count  uint16        `json:"count,omitempty"`
	Ratio  float32       `json:"ratio,omitempty" jsonschema:"exclusiveMinimum=0,exclusiveMaximum=1"`
	Score  float64       `json:"score,omitempty"`
	Exact  bool          `json:"exact,omitempty"`
	Sort   string        `json:"sort,omitempty" jsonschema:"enum=relevance,enum=date"`
	Level  int           `json:"level,omitempty" jsonschema:"enum=1,enum=2"`
	Opt    *int          `json:"opt,omitempty"`
	Tags   []string      `json:"tags,omitempty" jsonschema:"minItems=1,maxItems=3"`
	Window directInner   `json:"window"`
	Spans  []directInner `json:"spans,omitempty"`
	Ptr    *directInner  `json:"ptr,omitempty"`
}

// FuzzDirectAgrees holds the direct parser to the general path: whatever
// it accepts, ParseValue accepts without a repair rung, the library's
// validator accepts, and the binder stores the same value. Strict and
// not strict (the null plan) are both fuzzed.
func FuzzDirectAgrees(f *testing.F) {
	for _, s := range directSeeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, strict bool) {
		checkDirect(t, s, strict)
	})
}

var directSeeds = []string{
	`{"query":"hello","window":{"from":"2024-01-31"}}`,
	`{"query":"hello world","limit":-5,"count":65535,"ratio":0.5,"score":-1.5e3,"exact":true,"sort":"date","level":2,"opt":3,"tags":["a","b"],"window":{"from":"2024-01-31","days":365},"spans":[{"from":"2024-02-29"}],"ptr":{"from":"2024-03-01","days":1}}`,
	` {"query" : "é" , "window" : { "from" : "2024-01-31" } } `,
	`{"query":"a\u00e9\u0020b","window":{"from":"2024-01-31"}}`,
	`{"query":"hello","window":{"from":"2024-01-31"},"opt":null,"tags":null,"ptr":null}`,
	`{"query":"hello","window":{"from":"2024-01-31"},"limit":null}`,
	`{"query":"hello","query":"again","window":{"from":"2024-01-31"}}`,
	`{"query":"hello","window":{"from":"2024-02-30"}}`,
	`{"query":"Hello","window":{"from":"2024-01-31"}}`,
	`{"query":"","window":{"from":"2024-01-31"}}`,
	`{"query":"hello"}`, `{"window":{"from":"2024-01-31"}}`,
	`{"query":"hello","window":{"from":"2024-01-31"},"limit":101}`, `{"query":"hello","window":{"from":"2024-01-31"},"limit":1e1}`,
	`{"query":"hello","window":{"from":"2024-01-31"},"limit":1.0}`, `{"query":"hello","window":{"from":"2024-01-31"},"count":-1}`,
	`{"query":"hello","window":{"from":"2024-01-31"},"count":65536}`, `{"query":"hello","window":{"from":"2024-01-31"},"ratio":1}`,
	`{"query":"hello","window":{"from":"2024-01-31"},"ratio":1e39}`, `{"query":"hello","window":{"from":"2024-01-31"},"score":1e999}`,
	`{"query":"hello","window":{"from":"2024-01-31"},"sort":"size"}`, `{"query":"hello","window":{"from":"2024-01-31"},"level":1.0}`,
	`{"query":"hello","window":{"from":"2024-01-31"},"tags":[]}`, `{"query":"hello","window":{"from":"2024-01-31"},"tags":["a","b","c","d"]}`,
	`{"query":"hello","window":{"from":"2024-01-31"},"tags":["a",1]}`, `{"query":"hello","window":{"from":"2024-01-31"},"tags":["a",]}`,
	`{"query":"hello","window":{"from":"2024-01-31","x":1}}`, `{"query":"hello","window":{"from":"2024-01-31"},"QUERY":"x"}`,
	`{"query":"hello","window":{"from":"2024-01-31"},"labels":{"a":1}}`, `{"query":"hello","window":{"from":"2024-01-31"}}x`,
	`{"query":"hello","window":{"from":"2024-01-31"},}`, `{"query":"hel\ud800lo","window":{"from":"2024-01-31"}}`,
	"{\"query\":\"hel\xfflo\",\"window\":{\"from\":\"2024-01-31\"}}", `"{\"query\":\"hello\"}"`, `[]`, ``, `{}`,
	`{"query":"hello","window":{"from":"2024-01-31"},"exact":tru}`, `{"query":"hello","window":{"from":"2024-01-31"},"opt":-0}`,
	`{"query":"hello","window":{"from":"2024-01-31"},"score":-0.0}`, `{"query":"hello","window":{"from":"2024-01-31"},"spans":[{"from":"2024-01-31"},{"days":3}]}`,
}

// checkDirect runs the direct parser and, when it accepts s, the general
// path, and fails on any disagreement. It reports whether direct accepted.
func checkDirect(t *testing.T, s string, strict bool) bool {
	t.Helper()
	p, err := For[directTarget](strict)
	if err != nil {
		t.Fatal(err)
	}
	parse := DirectFor[directTarget](p)
	if parse == nil {
		t.Fatal("directTarget has no direct parser")
	}
	var got directTarget
	if !parse(s, &got) {
		return false
	}
	v, rungs, err := p.ParseValue(s, RepairOptions{})
	if err != nil || len(rungs) > 0 {
		t.Fatalf("strict %v, %s: direct accepts, the general path says %v (rungs %v)", strict, s, err, rungs)
	}
	if err := p.validateFull(v.V); err != nil {
		t.Fatalf("strict %v, %s: direct accepts, the library says %v", strict, s, err)
	}
	var want directTarget
	if ok, err := Bind(v.V, &want); !ok || err != nil {
		t.Fatalf("strict %v, %s: direct accepts, Bind says %v, %v", strict, s, ok, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("strict %v, %s:\ndirect %+v\nBind   %+v", strict, s, got, want)
	}
	return true
}

// TestDirectTakesTheCommonCase: the direct parser takes plain valid
// arguments (else the fuzz target above could not fail), and leaves
// every refusal to the general path.
func TestDirectTakesTheCommonCase(t *testing.T) {
	accepted := map[string]bool{}
	for _, strict := range []bool{false, true} {
		for _, s := range directSeeds {
			if checkDirect(t, s, strict) {
				accepted[s] = true
			}
		}
	}
	for _, s := range directSeeds[:5] {
		if !accepted[s] {
			t.Errorf("direct does not take %s", s)
		}
	}
	if n := len(accepted); n < 8 {
		t.Errorf("direct took %d seeds, want the valid ones", n)
	}
	// In strict mode a null stands for an absent optional field.
	p, _ := For[directTarget](true)
	var got directTarget
	if !DirectFor[directTarget](p)(`{"query":"hello","window":{"from":"2024-01-31"},"opt":null,"tags":null,"ptr":null}`, &got) {
		t.Error("strict: the nulls of absent fields are not taken")
	}
}

// Fields whose JSON names are alike ignoring case, or promoted from an
// embedded struct, follow encoding/json's rules on which field a key
// fills: the direct parser leaves such types to the general path.
func TestDirectLeavesAmbiguousFields(t *testing.T) {
	type twoNames struct {
		Foo string
		Bar string `json:"Foo"`
	}
	p, err := Compile(json.RawMessage(`{"type":"object","properties":{"Foo":{"type":"string"}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if DirectFor[twoNames](p) != nil {
		t.Error("direct covers a type with a key two fields answer to")
	}
	type Inner struct {
		X string `json:"x"`
	}
	type embeds struct {
		Inner
	}
	p, err = Compile(json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if DirectFor[embeds](p) != nil {
		t.Error("direct covers a type with a promoted field")
	}
}
