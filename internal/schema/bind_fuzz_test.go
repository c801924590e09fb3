package schema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type bindInner struct {
	ID    string   `json:"id"`
	Score *float64 `json:"score,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

type bindTarget struct {
	Query  string               `json:"query"`
	Limit  int8                 `json:"limit,omitempty"`
	Count  uint16               `json:"count,omitempty"`
	Ratio  float32              `json:"ratio,omitempty"`
	Exact  bool                 `json:"exact"`
	Opt    *int                 `json:"opt,omitempty"`
	Items  []bindInner          `json:"items,omitempty"`
	Window *bindInner           `json:"window,omitempty"`
	Labels map[string]int       `json:"labels,omitempty"`
	Nested map[string][]float64 `json:"nested,omitempty"`
	Plain  string
	Skip   string `json:"-"`
}

// FuzzBindAgrees: binding a parsed value gives what json.Unmarshal of the
// same value gives, and fails where it fails.
func FuzzBindAgrees(f *testing.F) {
	for _, s := range []string{
		`{"query":"q","limit":5,"count":7,"ratio":0.5,"exact":true,"opt":3,"items":[{"id":"a","score":1.5,"tags":["x"]}],"window":{"id":"w"},"labels":{"a":1},"nested":{"k":[1,2.5]},"Plain":"p","Skip":"s"}`,
		`{"limit":300}`, `{"count":-1}`, `{"ratio":1e39}`, `{"opt":null,"window":null,"items":null}`, `{"QUERY":"upper","plain":"lower"}`,
		`{"query":1}`, `{"items":[{"id":2}]}`, `{"labels":{"a":"x"}}`, `{"limit":1.0}`, `{"limit":1.5}`, `[]`, `"x"`, `null`, `{"items":[]}`,
	} {
		f.Add(s)
	}
	if binderFor(reflect.TypeFor[bindTarget]()) == nil {
		f.Fatal("bindTarget is not covered by Bind")
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := decodeAny(s)
		if err != nil || hasUnusableNumber(v) || foldedDuplicates(v) {
			return
		}
		integralNumbers(v)
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var want, got bindTarget
		werr := json.Unmarshal(data, &want)
		bound, gerr := Bind(v, &got)
		if !bound {
			t.Fatal("not bound")
		}
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%s: json.Unmarshal error %v, Bind error %v", data, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(want, got) {
			t.Fatalf("%s:\njson.Unmarshal %+v\nBind           %+v", data, want, got)
		}
	})
}

// foldedDuplicates reports keys of one object that differ only in case:
// json.Unmarshal then keeps the last in input order, which a map does not
// remember. Tool schemas are closed, so such keys never reach Bind.
func foldedDuplicates(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		seen := map[string]bool{}
		for k, e := range v {
			l := strings.ToLower(k)
			if seen[l] || foldedDuplicates(e) {
				return true
			}
			seen[l] = true
		}
	case []any:
		for _, e := range v {
			if foldedDuplicates(e) {
				return true
			}
		}
	}
	return false
}
