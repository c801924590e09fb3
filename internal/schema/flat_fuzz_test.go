package schema

import (
	"reflect"
	"testing"
)

// flatTarget is a flat struct of every scalar kind the flat parser
// takes, with and without checks beyond the type.
type flatTarget struct {
	Query string  `json:"query" jsonschema:"minLength=1,maxLength=20,pattern=^[a-z é]+$"`
	Note  string  `json:"note,omitempty"`
	Day   string  `json:"day,omitempty" jsonschema:"format=date"`
	Sort  string  `json:"sort,omitempty" jsonschema:"enum=relevance,enum=date"`
	Limit int8    `json:"limit,omitempty" jsonschema:"minimum=-5,maximum=100"`
	Count uint16  `json:"count,omitempty"`
	Ratio float32 `json:"ratio,omitempty" jsonschema:"exclusiveMinimum=0,exclusiveMaximum=1"`
	Score float64 `json:"score,omitempty"`
	Exact bool    `json:"exact,omitempty"`
	Level int     `json:"level,omitempty" jsonschema:"enum=1,enum=2"`
}

var flatSeeds = []string{
	`{"query":"hello"}`,
	`{"query":"hello world","note":"x","day":"2024-02-29","sort":"date","limit":-5,"count":65535,"ratio":0.5,"score":-1.5e3,"exact":true,"level":2}`,
	` { "query" : "é" , "note" : "a\"b\\c\u00e9" } `,
	`{"query":"hello","note":null,"limit":null}`, `{"query":"hello","query":"again"}`,
	`{"query":"Hello"}`, `{"query":""}`, `{}`, `{"note":"x"}`, `{"query":"hello","day":"2024-02-30"}`,
	`{"query":"hello","limit":101}`, `{"query":"hello","limit":1e1}`, `{"query":"hello","limit":1.0}`,
	`{"query":"hello","count":-1}`, `{"query":"hello","count":65536}`, `{"query":"hello","ratio":1}`,
	`{"query":"hello","ratio":1e39}`, `{"query":"hello","score":1e999}`, `{"query":"hello","sort":"size"}`,
	`{"query":"hello","level":1.0}`, `{"query":"hello","note":1}`, `{"query":"hello","exact":tru}`,
	`{"query":"hello","QUERY":"x"}`, `{"query":"hello","other":1}`, `{"query":"hello"}x`, `{"query":"hello",}`,
	`{"query":"hel\ud800lo"}`, "{\"query\":\"hel\xfflo\"}", "{\"query\":\"hello\",\"note\":\"a\x01\"}",
	`"{\"query\":\"hello\"}"`, `[]`, ``, `{"query":"hello","score":-0.0}`, `{"query":"hello","note":"\u0000"}`,
}

// FuzzFlatAgrees holds the flat parser to the general path and to the
// per-field direct parser: whatever it accepts, ParseValue accepts without
// a repair rung, the library's validator accepts, and the binder and the
// per-field parser store the same value; whatever the per-field parser
// accepts, it accepts too. Strict and not strict are both fuzzed.
func FuzzFlatAgrees(f *testing.F) {
	for _, s := range flatSeeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, strict bool) {
		checkFlat(t, s, strict)
	})
}

func checkFlat(t *testing.T, s string, strict bool) bool {
	t.Helper()
	p, err := For[flatTarget](strict)
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeFor[flatTarget]()
	fp := compileFlat(p.fast, p.nulls, typ)
	if fp == nil {
		t.Fatal("flatTarget has no flat parser")
	}
	perField := compileDirect(p.fast, p.nulls, typ, map[reflect.Type]bool{})
	if perField == nil {
		t.Fatal("flatTarget has no per-field parser")
	}
	var got, viaField flatTarget
	ok := fp.parse(s, reflect.ValueOf(&got).Elem())
	c := &scanner{s: s}
	c.space()
	fieldOK := perField(c, reflect.ValueOf(&viaField).Elem(), 0)
	c.space()
	fieldOK = fieldOK && c.i == len(s)
	if ok != fieldOK {
		t.Fatalf("strict %v, %s: flat says %v, the per-field parser %v", strict, s, ok, fieldOK)
	}
	if !ok {
		return false
	}
	if got != viaField {
		t.Fatalf("strict %v, %s:\nflat      %+v\nper field %+v", strict, s, got, viaField)
	}
	v, rungs, err := p.ParseValue(s, RepairOptions{})
	if err != nil || len(rungs) > 0 {
		t.Fatalf("strict %v, %s: flat accepts, the general path says %v (rungs %v)", strict, s, err, rungs)
	}
	if err := p.validateFull(v.V); err != nil {
		t.Fatalf("strict %v, %s: flat accepts, the library says %v", strict, s, err)
	}
	var want flatTarget
	if ok, err := Bind(v.V, &want); !ok || err != nil {
		t.Fatalf("strict %v, %s: flat accepts, Bind says %v, %v", strict, s, ok, err)
	}
	if got != want {
		t.Fatalf("strict %v, %s:\nflat %+v\nBind %+v", strict, s, got, want)
	}
	return true
}

// TestFlatTakesTheCommonCase: the flat parser takes plain valid arguments
// (else the fuzz target above could not fail), a flat struct gets it from
// DirectFor, and a struct with a field of another kind does not.
func TestFlatTakesTheCommonCase(t *testing.T) {
	accepted := 0
	for _, strict := range []bool{false, true} {
		for _, s := range flatSeeds {
			if checkFlat(t, s, strict) {
				accepted++
			}
		}
	}
	for _, s := range flatSeeds[:3] {
		if !checkFlat(t, s, false) {
			t.Errorf("flat does not take %s", s)
		}
	}
	if accepted < 8 {
		t.Errorf("flat took %d seeds, want the valid ones", accepted)
	}
	p, _ := For[flatTarget](true)
	if compileFlat(p.fast, p.nulls, reflect.TypeFor[flatTarget]()) == nil {
		t.Error("no flat parser for a flat struct")
	}
	var got flatTarget
	if !DirectFor[flatTarget](p)(`{"query":"hello","note":null}`, &got) || got.Query != "hello" {
		t.Errorf("strict: DirectFor's parser refuses a null optional field, or fills %+v", got)
	}
	dp, _ := For[directTarget](false)
	if compileFlat(dp.fast, dp.nulls, reflect.TypeFor[directTarget]()) != nil {
		t.Error("a flat parser for a struct with pointers, slices and structs")
	}
}
