package openai_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// jsonDiff compares two JSON documents by value (key order and spacing
// aside) and lists every difference by JSON pointer: what the SDK dropped,
// added or changed. Numbers are compared exactly, as decimals.
func jsonDiff(want, got []byte) ([]string, error) {
	w, err := decodeJSON(want)
	if err != nil {
		return nil, fmt.Errorf("original: %w", err)
	}
	g, err := decodeJSON(got)
	if err != nil {
		return nil, fmt.Errorf("re-marshalled: %w", err)
	}
	var diffs []string
	diffValue("", w, g, &diffs)
	return diffs, nil
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

func diffValue(path string, want, got any, diffs *[]string) {
	at := path
	if at == "" {
		at = "/"
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: object became %s", at, short(got)))
			return
		}
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := path + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
			wv, inW := w[k]
			gv, inG := g[k]
			switch {
			case !inG:
				*diffs = append(*diffs, fmt.Sprintf("%s: dropped (was %s)", p, short(wv)))
			case !inW:
				*diffs = append(*diffs, fmt.Sprintf("%s: added (%s)", p, short(gv)))
			default:
				diffValue(p, wv, gv, diffs)
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: array became %s", at, short(got)))
			return
		}
		if len(w) != len(g) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %d elements became %d", at, len(w), len(g)))
			return
		}
		for i := range w {
			diffValue(path+"/"+strconv.Itoa(i), w[i], g[i], diffs)
		}
	case json.Number:
		g, ok := got.(json.Number)
		if !ok || !sameNumber(w, g) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %s became %s", at, w, short(got)))
		}
	default: // string, bool, nil
		if want != got {
			*diffs = append(*diffs, fmt.Sprintf("%s: %s became %s", at, short(want), short(got)))
		}
	}
}

func sameNumber(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, ok1 := new(big.Rat).SetString(string(a))
	y, ok2 := new(big.Rat).SetString(string(b))
	return ok1 && ok2 && x.Cmp(y) == 0
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

func TestJSONDiffSeesEveryKindOfChange(t *testing.T) {
	cases := []struct {
		want, got string
		diffs     int
	}{
		{`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1.0}`, 0},
		{`{"a":1,"b":{"c":"x"}}`, `{"a":1,"b":{}}`, 1},
		{`{"a":1}`, `{"a":1,"strict":false}`, 1},
		{`{"a":"x"}`, `{"a":"y"}`, 1},
		{`{"a":[1,2]}`, `{"a":[1]}`, 1},
		{`{"a":[1,2]}`, `{"a":[2,1]}`, 2},
		{`{"a":null}`, `{}`, 1},
		{`{"a":12345678901234567891}`, `{"a":12345678901234567000}`, 1},
		{`{"a":{"b":1}}`, `{"a":[1]}`, 1},
	}
	for _, c := range cases {
		d, err := jsonDiff([]byte(c.want), []byte(c.got))
		if err != nil {
			t.Fatal(err)
		}
		if len(d) != c.diffs {
			t.Errorf("%s vs %s: %d differences %q, want %d", c.want, c.got, len(d), d, c.diffs)
		}
	}
}

// TestRoundTripSeesWhatTheSDKDrops shows that the round-trip checks can
// fail: the SDK's param types keep only the fields they know, so a field
// the worker would add outside the Responses API shapes is reported.
func TestRoundTripSeesWhatTheSDKDrops(t *testing.T) {
	_, diffs, err := roundTrip[responses.ToolUnionParam]([]byte(
		`{"type":"function","name":"x","parameters":{"type":"object"},"strict":true,"x_approval":true}`))
	if err != nil || !slices.Equal(diffs, []string{"/x_approval: dropped (was true)"}) {
		t.Errorf("tool: %q, %v", diffs, err)
	}
	_, diffs, err = roundTrip[responses.ResponseInputItemUnionParam]([]byte(
		`{"type":"function_call_output","call_id":"c","output":"x","status_detail":"late"}`))
	if err != nil || !slices.Equal(diffs, []string{`/status_detail: dropped (was "late")`}) {
		t.Errorf("item: %q, %v", diffs, err)
	}
	// In an array output, a part's field the SDK does not know is
	// dropped; a part of a type it does not have is read as no variant
	// and written back as it came, so only sdkParts sees it.
	u, diffs, err := roundTrip[responses.ResponseInputItemUnionParam]([]byte(
		`{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"data:image/png;base64,AA==","detail":"auto","alt":"x"},{"type":"input_audio","data":"AA=="}]}`))
	if err != nil || !slices.Equal(diffs, []string{`/output/0/alt: dropped (was "x")`}) {
		t.Errorf("array item: %q, %v", diffs, err)
	}
	if p := u.OfFunctionCallOutput.Output.OfResponseFunctionCallOutputItemArray; len(p) != 2 || p[1].OfInputText != nil || p[1].OfInputImage != nil || p[1].OfInputFile != nil {
		t.Errorf("input_audio part read as %+v", p)
	}
}

// TestOverrideKeepsCompactBytes pins what the byte-exact checks rely on:
// raw bytes given to param.Override reach the request body with their key
// order, escapes and number spelling. The SDK does compact them (the
// worker's JSON is compact, so nothing is lost).
func TestOverrideKeepsCompactBytes(t *testing.T) {
	raw := `{"type":"function","name":"x","description":"<a> & \u003cb\u003e \u2028","parameters":{"b":1,"a":2.50,"c":1e3}}`
	body := captureRequest(t, responses.ResponseNewParams{Model: "gpt-5",
		Tools: []responses.ToolUnionParam{param.Override[responses.ToolUnionParam](json.RawMessage(raw))},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if got := string(bodyField(t, body, "tools")); got != "["+raw+"]" {
		t.Errorf("sent %s, want [%s]", got, raw)
	}
	spaced := `{"type": "function", "name": "x"}`
	body = captureRequest(t, responses.ResponseNewParams{Model: "gpt-5",
		Tools: []responses.ToolUnionParam{param.Override[responses.ToolUnionParam](json.RawMessage(spaced))},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	t.Logf("with spaces: %s became %s", spaced, bodyField(t, body, "tools"))
}
