package console

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzClipAgrees checks that a value the list prepared once (showJSON
// within argsShown, as prepare does) and clipped to a step's share shows
// exactly what showJSON within that share shows, with the same count of
// bytes left out: the list offers Approve on a step whose arguments
// are not clipped, so a clip that under-counted would offer it for a
// value the page did not show whole.
func FuzzClipAgrees(f *testing.F) {
	f.Add([]byte(`{"command":"git log --oneline`+strings.Repeat(" ", 40)+`; rm -rf ~"}`), 120, 400)
	f.Add([]byte(`{"note":"a\u202eb\u200bc","n":[1,2,{"x":"<&>"}]}`), 90, 97)
	f.Add([]byte("not json \xff\xfe \u00e9\u0301 tail"), 40, 1000)
	f.Add([]byte(`{"a":"`+strings.Repeat("\u200b", 50)+strings.Repeat("x", 300)+`"}`), 61, 300)
	f.Fuzz(func(t *testing.T, raw []byte, small, big int) {
		if small <= 0 || big < small || big > 1<<16 {
			return
		}
		pre := showJSON(raw, big)
		got := pre.clip(small)
		want := showJSON(raw, small)
		if got.LeftOut != want.LeftOut || got.Total != want.Total || got.Cost != want.Cost {
			t.Fatalf("clip(%d) of the value shown within %d: left out %d of %d, cost %d; shown within %d: left out %d of %d, cost %d",
				small, big, got.LeftOut, got.Total, got.Cost, small, want.LeftOut, want.Total, want.Cost)
		}
		if len(got.Lines) != len(want.Lines) || len(got.Lines) > 0 && !reflect.DeepEqual(got.Lines, want.Lines) {
			t.Fatalf("clip(%d) shows %q, showJSON within %d shows %q", small, got.raw(), small, want.raw())
		}
	})
}
