package schema

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

//go:generate go run ./internal/corpusgen -o testdata/repair

// corpusCase is one line of testdata/repair/cases.jsonl (see corpusgen).
type corpusCase struct {
	ID     int             `json:"id"`
	Class  string          `json:"class"`
	Tool   string          `json:"tool"`
	Expect string          `json:"expect"`
	Args   string          `json:"args"`
	Want   json.RawMessage `json:"want"`
	// Mention is text a refusal's message must hold.
	Mention []string `json:"mention"`
	// ArgsBase64, when set, is Args byte for byte (not UTF-8).
	ArgsBase64 string `json:"args_base64"`
}

type score struct{ n, recovered, refused, wrong, cut int }

// TestRepairCorpusScore runs the generated corpus through Params.ParseValue
// with each tool's schema (destructive tools with Conservative set, as
// tools.Prepare does) and scores every case: recovered (ran with exactly
// the original value), refused, wrong (ran with another value, or ran an
// ambiguous text) or cut (ran a truncated text). It prints the table and
// fails below the targets: 98 % of the recoverable cases recovered on
// non-destructive tools, all of them on destructive tools, no wrong value
// and no cut value run.
func TestRepairCorpusScore(t *testing.T) {
	dir := filepath.Join("testdata", "repair")
	raw, err := os.ReadFile(filepath.Join(dir, "tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	var toolFiles map[string]struct {
		Destructive bool            `json:"destructive"`
		Schema      json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(raw, &toolFiles); err != nil {
		t.Fatal(err)
	}
	params := map[string]*Params{}
	for name, tf := range toolFiles {
		if params[name], err = Compile(tf.Schema, false); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	f, err := os.Open(filepath.Join(dir, "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	table := map[string]*score{}
	var totals [2]score    // [non-destructive, destructive]
	var recoverable [2]int // cases expected to be recovered
	var missed []string    // recoverable cases refused
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c corpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		if c.ArgsBase64 != "" {
			b, err := base64.StdEncoding.DecodeString(c.ArgsBase64)
			if err != nil {
				t.Fatalf("case %d: %v", c.ID, err)
			}
			c.Args = string(b)
		}
		p, tf := params[c.Tool], toolFiles[c.Tool]
		if p == nil {
			t.Fatalf("case %d: unknown tool %q", c.ID, c.Tool)
		}
		class := strings.SplitN(c.Class, "+", 2)[0]
		row := table[class]
		if row == nil {
			row = &score{}
			table[class] = row
		}
		d := 0
		if tf.Destructive {
			d = 1
		}
		tot := &totals[d]
		row.n++
		tot.n++
		if c.Expect == "recover" {
			recoverable[d]++
		}
		v, rungs, err := p.ParseValue(c.Args, RepairOptions{Conservative: tf.Destructive})
		switch {
		case err != nil:
			row.refused++
			tot.refused++
			if c.Expect == "recover" {
				missed = append(missed, fmt.Sprintf("case %d (%s, %s): refused: %v\n%s", c.ID, c.Class, c.Tool, err, c.Args))
			} else {
				checkRefusal(t, c, err)
				for _, m := range c.Mention {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("case %d (%s): the refusal does not say %q: %v", c.ID, c.Class, m, err)
					}
				}
				if len(err.Error()) > MaxMessageBytes {
					t.Errorf("case %d (%s): a refusal of %d bytes, over %d", c.ID, c.Class, len(err.Error()), MaxMessageBytes)
				}
			}
		case c.Expect == "recover" && sameValue(v.V, decodeNumbers(t, c.Want)):
			row.recovered++
			tot.recovered++
			// What the tool receives by the JSON path is what validated.
			checkReceived(t, fmt.Sprint("case ", c.ID), c.Args, v)
			data, _, _ := Repair(c.Args, RepairOptions{Conservative: tf.Destructive})
			if data == nil {
				data = []byte(trimJSONSpace(c.Args)) // valid as sent
			}
			if err := differential(c.Args, data); err != nil {
				t.Errorf("case %d (%s): %v", c.ID, c.Class, err)
			}
		case strings.HasPrefix(c.Class, "cut_"):
			row.cut++
			tot.cut++
			t.Errorf("case %d (%s, %s): a cut value ran (rungs %q): %v\n%s", c.ID, c.Class, c.Tool, rungs, v.V, c.Args)
		default:
			row.wrong++
			tot.wrong++
			t.Errorf("case %d (%s, %s): wrong value ran (rungs %q): %v\n%s", c.ID, c.Class, c.Tool, rungs, v.V, c.Args)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%-22s %6s %9s %7s %5s %4s\n", "class", "cases", "recovered", "refused", "wrong", "cut")
	classes := make([]string, 0, len(table))
	for c := range table {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	for _, c := range classes {
		r := table[c]
		fmt.Fprintf(&b, "%-22s %6d %9d %7d %5d %4d\n", c, r.n, r.recovered, r.refused, r.wrong, r.cut)
	}
	for i, name := range []string{"non-destructive", "destructive"} {
		r := totals[i]
		fmt.Fprintf(&b, "%-22s %6d %9d %7d %5d %4d\n", "total "+name, r.n, r.recovered, r.refused, r.wrong, r.cut)
	}
	t.Logf("repair corpus:\n%s", b.String())

	for _, m := range missed[:min(len(missed), 20)] {
		t.Log(m)
	}
	for i, name := range []string{"non-destructive", "destructive"} {
		r := totals[i]
		if r.wrong != 0 || r.cut != 0 {
			t.Errorf("%s tools: %d wrong and %d cut values ran, want none", name, r.wrong, r.cut)
		}
		// Every class of the corpus but the cuts and the ambiguous texts
		// is lossless: destructive tools must recover all of it.
		target := 0.98
		if i == 1 {
			target = 1
		}
		if rate := float64(r.recovered) / float64(max(recoverable[i], 1)); rate < target {
			t.Errorf("%s tools: %d of %d recoverable cases recovered (%.2f%%), want at least %.0f%%",
				name, r.recovered, recoverable[i], 100*rate, 100*target)
		}
	}
}

// checkRefusal holds a refusal of a corpus case to the contract: a cut is
// named as one, with its offset, and the text is one sentence.
func checkRefusal(t *testing.T, c corpusCase, err error) {
	t.Helper()
	var se *SyntaxError
	if !errors.As(err, &se) {
		return // a schema violation of an ambiguous text: refused all the same
	}
	if strings.HasPrefix(c.Class, "cut_") && !errors.Is(err, ErrTruncated) {
		t.Errorf("case %d (%s): refused, but not as cut off: %v\n%s", c.ID, c.Class, err, c.Args)
	}
	checkSentence(t, fmt.Sprint("case ", c.ID), err.Error())
}

func decodeNumbers(t *testing.T, data []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("want %s: %v", data, err)
	}
	return v
}

// sameValue compares decoded values, numbers as written: the tool gets
// the number the model sent (-0.0 is not 0, 2e2 not 200).
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		return ok && a == bn
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], bs[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}
