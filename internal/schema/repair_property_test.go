package schema

import (
	"encoding/json"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestRepairProperty writes random values, with strings full of what the
// ladder's rungs look for (quotes, backslashes, comment markers, braces,
// fences, template tokens, non-ASCII), in the styles models use (JSON,
// JSON5-like, Python repr), and damages them losslessly: every one must
// come back exactly. Cut at a random byte, each must be refused or, when
// the cut fell after the object, run the same value.
func TestRepairProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 7))
	p, err := Compile([]byte(`{"type":"object"}`), false)
	if err != nil {
		t.Fatal(err)
	}
	pieces := []string{"a", "Z", " ", "'", `"`, `\`, "/", "//", "/*", "*/", "{", "}", "[", "]", ",", ":", "```", "<|call|>", "</tool_call>",
		"é", "日本", "😀", "\n", "\t", "True", "None", "null", "1", "-", "#", "\u00a0", "\u2028", "$", "\\d", "%", "\x01"}
	var str func() string
	str = func() string {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return b.String()
	}
	var val func(d int) any
	val = func(d int) any {
		switch k := r.IntN(10); {
		case k < 3 || d > 3:
			return str()
		case k < 4:
			return json.Number(strconv.Itoa(r.IntN(2000) - 1000))
		case k < 5:
			return []any{true, false, nil}[r.IntN(3)]
		case k < 7:
			a := make([]any, r.IntN(4))
			for i := range a {
				a[i] = val(d + 1)
			}
			return a
		default:
			m := map[string]any{}
			for range r.IntN(4) {
				m[str()] = val(d + 1)
			}
			return m
		}
	}
	for n := 0; n < 20000; n++ {
		m := map[string]any{}
		for range 1 + r.IntN(4) {
			m["k"+strconv.Itoa(r.IntN(100))] = val(1)
		}
		style := r.IntN(5)
		text := render(m, style, r)
		switch r.IntN(6) {
		case 0:
			text = "```json\n" + text + "\n```"
		case 1:
			text = "Here are the arguments:\n" + text + "\nDone."
		case 2:
			text = text + "<|call|>"
		case 3:
			text = "<tool_call>\n" + text + "\n</tool_call>"
		case 4:
			text = "{" + text + "}"
		}
		v, rungs, err := p.ParseValue(text, RepairOptions{})
		want := decodeNumbers(t, mustMarshal(t, m))
		if err != nil {
			t.Errorf("style %d: refused %q: %v", style, text, err)
			continue
		}
		if !sameValue(v.V, want) {
			t.Errorf("style %d: %q ran %v (rungs %q), want %v", style, text, v.V, rungs, want)
			continue
		}
		k := 1 + r.IntN(len(text)-1)
		if cv, _, err := p.ParseValue(text[:k], RepairOptions{}); err == nil && trimJSONSpace(text[:k]) != "" && !sameValue(cv.V, want) {
			t.Errorf("%q cut to %q ran %v", text, text[:k], cv.V)
		}
	}
}

// render writes m as JSON (0), JSON with trailing commas and comments
// (1), with unquoted identifier keys and single-quoted strings where no
// apostrophe is inside (2), as Python's repr would (3), or with raw control
// charEscapes are the letters after a backslash that JSON or a common
// language reads as a character: a raw backslash before any of them is
// refused (or is an escape), so the generator never writes one there.
const charEscapes = `"\/bfnrtu'xUaev01234567N`

// characters and lone backslashes in strings and no commas between
// members (4).
func render(v any, style int, r *rand.Rand) string {
	var b strings.Builder
	var w func(v any)
	quote := func(s string) {
		if (style == 2 || style == 3) && !strings.Contains(s, "'") {
			js, _ := json.Marshal(s)
			// '...' with the same escapes, " needing none.
			inner := strings.ReplaceAll(string(js[1:len(js)-1]), `\"`, `"`)
			b.WriteString("'" + inner + "'")
			return
		}
		if style == 4 {
			b.WriteByte('"')
			for i := 0; i < len(s); i++ {
				switch c := s[i]; {
				case c == '"':
					b.WriteString(`\"`)
				case c == '\\':
					if i+1 < len(s) && !strings.ContainsRune(charEscapes, rune(s[i+1])) {
						b.WriteByte('\\') // kept as a backslash and the next character
					} else {
						b.WriteString(`\\`)
					}
				case c == '/' && r.IntN(2) == 0:
					b.WriteString(`\/`)
				default:
					b.WriteByte(c) // raw control characters too
				}
			}
			b.WriteByte('"')
			return
		}
		js, _ := json.Marshal(s)
		b.WriteString(string(js))
	}
	w = func(v any) {
		switch x := v.(type) {
		case string:
			quote(x)
		case json.Number:
			b.WriteString(string(x))
		case bool:
			if style == 3 {
				b.WriteString(map[bool]string{true: "True", false: "False"}[x])
			} else {
				b.WriteString(strconv.FormatBool(x))
			}
		case nil:
			if style == 3 {
				b.WriteString("None")
			} else {
				b.WriteString("null")
			}
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteString(", ")
				}
				w(e)
			}
			if style == 1 && len(x) > 0 {
				b.WriteString(",")
			}
			b.WriteByte(']')
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 && style == 4 {
					b.WriteString("\n ")
				} else if i > 0 {
					b.WriteString(", ")
				}
				if style == 1 && r.IntN(3) == 0 {
					b.WriteString("/* c */ ")
				}
				if style == 2 && isIdent(k) && k != "True" && k != "False" && k != "None" { // those have two readings unquoted
					b.WriteString(k)
				} else {
					quote(k)
				}
				b.WriteString(": ")
				w(x[k])
			}
			if style == 1 && len(x) > 0 {
				b.WriteString(", // end\n")
			}
			b.WriteByte('}')
		}
	}
	w(v)
	return b.String()
}

func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}
