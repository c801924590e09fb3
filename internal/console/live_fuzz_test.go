package console

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// printable reports whether a plain segment draws only printable ASCII:
// every other character is a marker's.
func printable(text string) bool {
	for i := 0; i < len(text); i++ {
		if text[i] < 0x20 || text[i] > 0x7e {
			return false
		}
	}
	return true
}

// FuzzRenderLive: whatever bytes an event holds, its rendered row draws
// no character outside printable ASCII as it is (each is a marker's),
// every cell weighs at most maxShortShown and its JSON at most
// liveJSONShown, and the JSON, when whole, reads back (markers as what
// they stand for) as the event's indented JSON.
func FuzzRenderLive(f *testing.F) {
	f.Add([]byte(`{"type":"call.output","call_id":"c\u202e1","name":"x\u0301\u0301\u0301","status":"ok","duration_ms":12345678901234567890,"step":1e400}`))
	f.Add([]byte(`{"state":"running","label":"a\ud800b\ud800\ud800","progress":{"done":-0.0,"total":0.1000000000000000000000001}}`))
	f.Add([]byte(`{"type":"step.done","items":[1,2],"end_turn":true,"namespace":"\u0000\n\n"}`))
	f.Add([]byte("not json \xff \u200b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, source := range []string{"output", "activity"} {
			ev := liveEvent{Source: source, AgentID: "a\u200b", TurnID: "t", Key: "k\xff"}
			renderLive(&ev, data)
			for i, c := range append(ev.Cells[:], ev.JSON) {
				for _, l := range c.Lines {
					for _, g := range l {
						if g[0] == "" && !printable(strings.ReplaceAll(g[1], " · ", " ")) { // the page's separator
							t.Fatalf("part %d draws %q as it is", i, g[1])
						}
					}
				}
			}
		}
		// A budget on the markers made changes nothing shown.
		for _, limit := range []int{1, 40, 300, 4096} {
			var b bytes.Buffer
			if json.Indent(&b, data, "", "  ") != nil {
				break
			}
			u := unescapeStrings(b.Bytes())
			lines := strings.Split(u, "\n")
			whole := fitLines(len(lines), func(i int) []seg { return visibleJSON(lines[i]) }, len(u), limit)
			if got := showJSON(data, limit); !reflect.DeepEqual(got, whole) {
				t.Fatalf("within %d: %+v, shown whole then clipped %+v", limit, got, whole)
			}
		}
		// A string member reads back (markers as what they stand for)
		// as its value, and counts its bytes.
		var s string
		if json.Unmarshal(data, &s) != nil || !utf8.Valid(data) || strings.Contains(strings.ToLower(string(data)), `\ud`) {
			return
		}
		var c cell
		c.value(data)
		var b strings.Builder
		for _, g := range c.segs {
			if g.Mark {
				b.WriteString(g.Raw)
			} else if !g.Note {
				b.WriteString(g.Text)
			}
		}
		if c.total != len(s) || len(s) <= maxShortShown/64 && b.String() != s {
			t.Fatalf("string %s read back as %q (%d bytes counted), is %q", data, b.String(), c.total, s)
		}
	})
}
