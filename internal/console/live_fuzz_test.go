package console

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// FuzzEventNames: every character outside printable ASCII in a live
// event's strings and keys has a marker among the event's names (up to
// maxNames of them), and every name is a marker of its code point.
func FuzzEventNames(f *testing.F) {
	f.Add([]byte(`{"type":"step.pending","label":"rm -rf /tmp/\u0430 \u202e","approvals":[{"arguments":"{\"a\":\"\uff52\"}"}]}`))
	f.Add([]byte(`{"k\u200b":["x\ud800y","\u0301"]}`))
	f.Add([]byte(`"\u2028"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		names := eventNames(data)
		for k, v := range names {
			cp, err := strconv.ParseInt(k, 16, 32)
			if err != nil {
				t.Fatalf("name key %q", k)
			}
			if !strings.HasPrefix(v, fmt.Sprintf("⟦U+%04X ", cp)) {
				t.Fatalf("name of %s: %q", k, v)
			}
		}
		var v any
		if json.Unmarshal(data, &v) != nil || len(names) >= maxNames {
			return
		}
		var walk func(any)
		check := func(s string) {
			for _, r := range s {
				if (r < 0x20 || r > 0x7e) && names[strconv.FormatInt(int64(r), 16)] == "" {
					t.Fatalf("U+%04X of %q has no name", r, s)
				}
			}
		}
		walk = func(v any) {
			switch v := v.(type) {
			case string:
				check(v)
			case []any:
				for _, e := range v {
					walk(e)
				}
			case map[string]any:
				for k, e := range v {
					check(k)
					walk(e)
				}
			}
		}
		walk(v)
	})
}
