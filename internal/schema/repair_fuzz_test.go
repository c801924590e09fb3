package schema

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

// FuzzRepair checks the ladder's invariants on arbitrary input:
//   - Repair never panics;
//   - on success the output is valid JSON, and valid input comes back as
//     sent with no rungs;
//   - every error wraps exactly one of the sentinels;
//   - conservative mode never reports close_truncated or json_repair, and
//     whatever it accepts the full ladder accepts identically;
//   - every proper prefix of a valid object repairs with close_truncated
//     alone (checked for small inputs, as it is quadratic).
func FuzzRepair(f *testing.F) {
	for _, tc := range repairCorpus {
		f.Add(tc.in, false)
		f.Add(tc.in, true)
	}
	for _, s := range realisticArgs {
		f.Add(s, false)
		f.Add(s[:len(s)/2], false)
	}

	f.Fuzz(func(t *testing.T, args string, conservative bool) {
		opt := RepairOptions{Conservative: conservative}
		got, rungs, err := Repair(args, opt)
		if err != nil {
			tooLarge, unparseable := errors.Is(err, ErrArgumentsTooLarge), errors.Is(err, ErrUnparseable)
			if tooLarge == unparseable {
				t.Fatalf("Repair(%q): error %v wraps neither or both sentinels", args, err)
			}
			if got != nil || rungs != nil {
				t.Fatalf("Repair(%q): results %q, %q alongside error", args, got, rungs)
			}
			return
		}
		if !json.Valid(got) {
			t.Fatalf("Repair(%q) = %q: invalid JSON (rungs %q)", args, got, rungs)
		}
		trimmed := trimJSONSpace(args)
		if json.Valid([]byte(trimmed)) && (rungs != nil || string(got) != trimmed) {
			t.Fatalf("Repair(%q) = %q, %q: valid input was changed", args, got, rungs)
		}
		for _, r := range rungs {
			if r != RungStripFences && r != RungCloseTruncated && r != RungJSONRepair {
				t.Fatalf("Repair(%q): unknown rung %q", args, r)
			}
		}
		if !slices.IsSortedFunc(rungs, func(a, b string) int { return rungRank(a) - rungRank(b) }) ||
			len(slices.Compact(slices.Clone(rungs))) != len(rungs) {
			t.Fatalf("Repair(%q): rungs %q out of order or repeated", args, rungs)
		}
		if conservative {
			if slices.Contains(rungs, RungCloseTruncated) || slices.Contains(rungs, RungJSONRepair) {
				t.Fatalf("Repair(%q) in conservative mode used %q", args, rungs)
			}
			full, fullRungs, err := Repair(args, RepairOptions{})
			if err != nil || string(full) != string(got) || !slices.Equal(fullRungs, rungs) {
				t.Fatalf("Repair(%q): conservative %q %q, full ladder %q %q %v", args, got, rungs, full, fullRungs, err)
			}
		}

		// Truncations of valid objects are rung 3's whole purpose.
		if !conservative && rungs == nil && len(trimmed) <= 512 && trimmed != "" && trimmed[0] == '{' {
			for k := 1; k < len(trimmed); k++ {
				out, r, err := Repair(trimmed[:k], RepairOptions{})
				if err != nil || !json.Valid(out) || !slices.Equal(r, []string{RungCloseTruncated}) {
					t.Fatalf("Repair(%q) (prefix of %q) = %q, %q, %v", trimmed[:k], trimmed, out, r, err)
				}
			}
		}
	})
}

func rungRank(r string) int {
	switch r {
	case RungStripFences:
		return 2
	case RungCloseTruncated:
		return 3
	}
	return 4
}
