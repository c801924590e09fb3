package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzRepair checks the ladder's invariants on arbitrary input:
//   - Repair never panics;
//   - on success the output is valid JSON, and valid input comes back as
//     sent with no rungs (a JSON string holding an object excepted);
//   - the differential property: every string and number of a repaired
//     value is in the text as the model wrote it;
//   - every error is a *SyntaxError wrapping ErrUnparseable or
//     ErrArgumentsTooLarge, and nothing but rungs comes with it;
//   - rungs are known, in ladder order, each once; conservative mode gives
//     the same answer as the full ladder (no rung is a guess);
//   - every proper prefix of a valid object is refused as cut off (checked
//     for small inputs, as it is quadratic).
func FuzzRepair(f *testing.F) {
	for _, tc := range repairCorpus {
		f.Add(tc.in, false)
	}
	for _, tc := range refusalCorpus {
		f.Add(tc.in, true)
	}
	for _, s := range realisticArgs {
		f.Add(s, false)
		f.Add(s[:len(s)/2], false)
	}
	// A sample of the generated corpus, every class in it.
	if data, err := os.ReadFile(filepath.Join("testdata", "repair", "cases.jsonl")); err == nil {
		for i, line := range bytes.Split(data, []byte("\n")) {
			var c corpusCase
			if i%20 == 0 && json.Unmarshal(line, &c) == nil {
				f.Add(c.Args, i%40 == 0)
			}
		}
	}
	// The paths of issue 22's hostile shapes: escapes between single
	// quotes, unquoted literal keys, JSON in three layers of string.
	for _, s := range []string{
		`{'a': 'x\/y'}`, "{'a': 'x\\\ny'}", `{"a": "\777\400\xA\U1F680"}`, `{True: 1}`,
		`"\"\\\"{\\\\\\\"a\\\\\\\":1}\\\"\""`, `Here: "\"{\\\"a\\\": 1}\""`,
	} {
		f.Add(s, false)
	}
	rank := map[string]int{}
	for i, r := range Rungs() {
		rank[r.Name] = i
	}

	f.Fuzz(func(t *testing.T, args string, conservative bool) {
		opt := RepairOptions{Conservative: conservative}
		got, rungs, err := Repair(args, opt)
		for _, r := range rungs {
			if _, ok := rank[r]; !ok {
				t.Fatalf("Repair(%q): unknown rung %q", args, r)
			}
		}
		if !slices.IsSortedFunc(rungs, func(a, b string) int { return rank[a] - rank[b] }) ||
			len(slices.Compact(slices.Clone(rungs))) != len(rungs) {
			t.Fatalf("Repair(%q): rungs %q out of order or repeated", args, rungs)
		}
		full, fullRungs, fullErr := Repair(args, RepairOptions{Conservative: !conservative})
		if string(full) != string(got) || !slices.Equal(fullRungs, rungs) || (err == nil) != (fullErr == nil) {
			t.Fatalf("Repair(%q): conservative and full ladders differ: %q %q %v / %q %q %v", args, got, rungs, err, full, fullRungs, fullErr)
		}
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || errors.Is(err, ErrArgumentsTooLarge) == errors.Is(err, ErrUnparseable) {
				t.Fatalf("Repair(%q): error %v", args, err)
			}
			if got != nil {
				t.Fatalf("Repair(%q): result %q alongside error", args, got)
			}
			return
		}
		if !json.Valid(got) {
			t.Fatalf("Repair(%q) = %q: invalid JSON (rungs %q)", args, got, rungs)
		}
		if _, err := decodeAny(string(got)); err != nil {
			// A string that holds no text, or too deep a value, got past
			// the ladder.
			t.Fatalf("Repair(%q) = %q, which the decoder refuses: %v", args, got, err)
		}
		trimmed := trimJSONSpace(args)
		if json.Valid([]byte(trimmed)) && trimmed != "" && trimmed[0] != '"' && (rungs != nil || string(got) != trimmed) {
			t.Fatalf("Repair(%q) = %q, %q: valid input was changed", args, got, rungs)
		}
		if err := differential(args, got); err != nil {
			t.Fatalf("Repair(%q) = %s (rungs %q): %v", args, got, rungs, err)
		}

		// Every proper prefix of a valid object is cut off.
		if rungs == nil && len(trimmed) <= 512 && trimmed != "" && trimmed[0] == '{' {
			for k := 1; k < len(trimmed); k++ {
				out, _, err := Repair(trimmed[:k], RepairOptions{})
				if !errors.Is(err, ErrTruncated) {
					t.Fatalf("Repair(%q) (prefix of %q) = %q, %v; want a cut-off refusal", trimmed[:k], trimmed, out, err)
				}
			}
		}
	})
}
