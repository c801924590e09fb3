package schema

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// escapeSegment is one piece of a string as a hostile model writes it,
// with its one reading between double and between single quotes ("" and
// refuse set when it has two readings or none there).
type escapeSegment struct {
	text               string
	dq, sq             string
	dqRefuse, sqRefuse bool
	dqOnly, sqOnly     bool // the quote of the other style would end the string
}

// escapeTable is the verdict of every escape family, written from the
// languages' definitions and independent of the reader: JSON's escapes
// are JSON's; escapes Python, JavaScript or C read as a character are
// refused between double quotes and, for Python's \x, \u and \U, the
// character between single quotes; escapes no language reads stay as a
// backslash and the character.
var escapeTable = []escapeSegment{
	{text: "a", dq: "a", sq: "a"},
	{text: "é☕", dq: "é☕", sq: "é☕"},
	{text: " ", dq: " ", sq: " "},
	{text: "'", dq: "'", dqOnly: true},
	{text: `"`, sq: `"`, sqOnly: true},
	{text: `\n`, dq: "\n", sq: "\n"},
	{text: `\t`, dq: "\t", sq: "\t"},
	{text: `\"`, dq: `"`, sq: `"`},
	{text: `\\`, dq: `\`, sq: `\`},
	{text: `\/`, dq: "/", sqRefuse: true},
	{text: `\'`, dqRefuse: true, sq: "'"},
	{text: `\d`, dq: `\d`, sq: `\d`},
	{text: `\s`, dq: `\s`, sq: `\s`},
	{text: `\.`, dq: `\.`, sq: `\.`},
	{text: `\8`, dq: `\8`, sq: `\8`},
	{text: `\$`, dq: `\$`, sq: `\$`},
	{text: `\xyz`, dq: `\xyz`, sq: `\xyz`},
	{text: `\users`, dq: `\users`, sq: `\users`},
	{text: `\Users`, dq: `\Users`, sq: `\Users`},
	{text: `\u00e9`, dq: "é", sq: "é"},
	{text: `\ud83d\ude80`, dq: "🚀", sq: "🚀"},
	{text: `\u0000`, dq: "\x00", sq: "\x00"},
	{text: `\x1b`, dqRefuse: true, sq: "\x1b"},
	{text: `\xe9`, dqRefuse: true, sq: "é"},
	{text: `\U0001F680`, dqRefuse: true, sq: "🚀"},
	{text: `\ud800x`, dqRefuse: true, sqRefuse: true}, // x: no low half can follow
	{text: `\udc00`, dqRefuse: true, sqRefuse: true},
	{text: `\0`, dqRefuse: true, sqRefuse: true},
	{text: `\012`, dqRefuse: true, sqRefuse: true},
	{text: `\777`, dqRefuse: true, sqRefuse: true},
	{text: `\v`, dqRefuse: true, sqRefuse: true},
	{text: `\a`, dqRefuse: true, sqRefuse: true},
	{text: `\e`, dqRefuse: true, sqRefuse: true},
	{text: `\u{41}`, dqRefuse: true, sqRefuse: true},
	{text: `\N{BULLET}`, dqRefuse: true, sqRefuse: true},
	{text: "\\\n", dq: "\\\n", sqRefuse: true},
	{text: "\\\u2028", dq: "\\\u2028", sqRefuse: true},
	{text: `\N`, dq: `\N`, sq: `\N`},
	{text: `\?`, dq: `\?`, sq: `\?`},
	{text: "\xff", dqRefuse: true, sqRefuse: true},
	{text: "\xed\xa0\x80", dqRefuse: true, sqRefuse: true},
}

// TestHostileEscapesProperty builds strings from random runs of the
// table's segments, as values and as keys, between double and single
// quotes, and holds the ladder to the table: a string with any segment
// that has two readings is refused, every other runs with exactly the
// concatenated reading. Four goroutines share one Params, as agents side
// by side do.
func TestHostileEscapesProperty(t *testing.T) {
	p, err := Compile([]byte(`{"type":"object"}`), false)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(22, uint64(w)))
			for i := range 1500 {
				if msg := hostileCase(p, r); msg != "" {
					t.Errorf("worker %d case %d: %s", w, i, msg)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func hostileCase(p *Params, r *rand.Rand) string {
	single := r.IntN(2) == 0
	var text, want strings.Builder
	refuse := false
	for range 1 + r.IntN(6) {
		s := escapeTable[r.IntN(len(escapeTable))]
		if single && s.dqOnly || !single && s.sqOnly {
			continue
		}
		text.WriteString(s.text)
		if single {
			want.WriteString(s.sq)
			refuse = refuse || s.sqRefuse
		} else {
			want.WriteString(s.dq)
			refuse = refuse || s.dqRefuse
		}
	}
	q := `"`
	if single {
		q = "'"
	}
	str := q + text.String() + q
	asKey := r.IntN(3) == 0
	args := `{"v": ` + str + `, "n": 1}`
	if asKey {
		args = `{` + str + `: 1}`
	}
	for _, conservative := range []bool{false, true} {
		v, rungs, err := p.ParseValue(args, RepairOptions{Conservative: conservative})
		switch {
		case refuse && err == nil:
			return fmt.Sprintf("%q ran (rungs %q) as %#v, want a refusal", args, rungs, v.V)
		case !refuse && err != nil:
			return fmt.Sprintf("%q refused, want %q: %v", args, want.String(), err)
		case err != nil:
			if len(err.Error()) > MaxMessageBytes || !strings.Contains(err.Error(), "byte ") {
				return fmt.Sprintf("%q: refusal without a byte offset, or too long: %v", args, err)
			}
			continue
		}
		m, _ := v.V.(map[string]any)
		if asKey {
			if _, ok := m[want.String()]; !ok || len(m) != 1 {
				return fmt.Sprintf("%q ran with keys %#v, want the key %q", args, m, want.String())
			}
		} else if got, _ := m["v"].(string); got != want.String() || len(m) != 2 {
			return fmt.Sprintf("%q ran as %#v, want %q", args, m, want.String())
		}
	}
	return ""
}
