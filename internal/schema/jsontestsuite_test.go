package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestJSONTestSuite runs every file of nst/JSONTestSuite's test_parsing
// directory (set JSONTESTSUITE to it; the suite is not part of this
// repository) wrapped as {"v": …} through ParseValue, and holds whatever
// is accepted to the contract: the value a tool receives, by either path
// (Bind's value or the JSON text), is the value validated, every string is
// UTF-8, a schema {"const": "\ufffd"} accepts only a U+FFFD the model sent,
// and every number is one the text holds. A valid file (y_) is refused
// only for a key twice in an object, a string that holds no text or too
// deep a nesting.
func TestJSONTestSuite(t *testing.T) {
	dir := os.Getenv("JSONTESTSUITE")
	if dir == "" {
		t.Skip("set JSONTESTSUITE to the test_parsing directory of github.com/nst/JSONTestSuite to run it")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no JSON files in %s: %v", dir, err)
	}
	anyObject, err := Compile(json.RawMessage(`{"type":"object"}`), false)
	if err != nil {
		t.Fatal(err)
	}
	replacement, err := Compile(json.RawMessage(`{"type":"object","properties":{"v":{"const":"\ufffd"}},"required":["v"]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string][2]int{} // prefix → accepted, refused
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		args := `{"v": ` + string(data) + `}`
		v, _, err := anyObject.ParseValue(args, RepairOptions{})
		c := counts[name[:2]]
		if err != nil {
			c[1]++
			counts[name[:2]] = c
			var se *SyntaxError
			dup := strings.Contains(err.Error(), "more than once")
			if strings.HasPrefix(name, "y_") && !dup && (!errors.As(err, &se) || !strings.Contains(se.msg, "cannot be used")) {
				t.Errorf("%s: valid JSON refused: %v", name, err)
			}
			if len(err.Error()) > MaxMessageBytes {
				t.Errorf("%s: refusal of %d bytes", name, len(err.Error()))
			}
			continue
		}
		c[0]++
		counts[name[:2]] = c
		if !strings.HasPrefix(name, "y_") {
			got, _ := v.JSON()
			t.Logf("%s: %q accepted as %s", name, data, got)
		}
		checkReceived(t, name, args, v)
		if _, _, err := replacement.ParseValue(args, RepairOptions{}); err == nil &&
			!strings.Contains(args, "\ufffd") && !strings.Contains(strings.ToLower(args), `\ufffd`) {
			t.Errorf("%s: {\"const\": \"\\ufffd\"} accepts %q, which sends no U+FFFD", name, args)
		}
	}
	prefixes := make([]string, 0, len(counts))
	for p := range counts {
		prefixes = append(prefixes, p)
	}
	sort.Strings(prefixes)
	for _, p := range prefixes {
		t.Logf("%s: %d accepted, %d refused", p, counts[p][0], counts[p][1])
	}
}

// checkReceived holds an accepted value to what a tool receives: the JSON
// text (the path of types Bind does not cover) decodes to the value
// validated, the value encodes and decodes to itself, its strings are
// UTF-8 and its numbers are literals of the text sent.
func checkReceived(t *testing.T, name, args string, v Value) {
	t.Helper()
	data, err := v.JSON()
	if err != nil {
		t.Errorf("%s: the accepted value does not encode: %v", name, err)
		return
	}
	if got := decodeUseNumber(data); !reflect.DeepEqual(got, v.V) {
		t.Errorf("%s: the tool's JSON %q decodes to %#v, but %#v was validated", name, data, got, v.V)
	}
	again, err := json.Marshal(v.V)
	if err != nil {
		t.Errorf("%s: %v", name, err)
	} else if got := decodeUseNumber(again); !reflect.DeepEqual(got, v.V) {
		t.Errorf("%s: the value encodes as %q, which decodes to %#v, not %#v", name, again, got, v.V)
	}
	walkValue(v.V, func(x any) {
		switch x := x.(type) {
		case string:
			if !utf8.ValidString(x) {
				t.Errorf("%s: accepted string %q is not UTF-8", name, x)
			}
		case json.Number:
			if !strings.Contains(args, string(x)) {
				t.Errorf("%s: number %s is not in the text sent %q", name, x, args)
			}
		}
	})
}

func decodeUseNumber(data []byte) any {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return errors.New("does not decode")
	}
	return v
}

func walkValue(v any, f func(any)) {
	f(v)
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			f(k)
			walkValue(e, f)
		}
	case []any:
		for _, e := range x {
			walkValue(e, f)
		}
	}
}
