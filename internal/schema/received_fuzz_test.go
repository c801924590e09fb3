package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzReceivedIsValidated: whatever the ladder accepts, the value the tool
// receives equals the value validated. The JSON text a tool decodes (for
// types Bind does not cover) decodes to exactly the value validated, the
// value encodes and decodes to itself (no string that holds no text, no
// number respelled), and a schema that accepts only U+FFFD in a string
// accepts it only when the model sent one.
func FuzzReceivedIsValidated(f *testing.F) {
	for _, s := range []string{
		`{"v":"\ud800"}`, `{"v":"\udc00\ud800"}`, "{\"v\":\"\xff\"}", `{"v":"\ufffd"}`, "{\"v\":\"\uFFFD\"}",
		`{'v': '\x1b'}`, `{"v": "\x1b"}`, `{"v": -0.0, "w": 2e2}`, `{"v": "\u00A"}`, `{"v": "\uD834\uDd"}`,
		`{"a": true} "x"`, "```json title=\"a\"\n{\"v\":1}\n```", `"\"{\\\"v\\\":1}\""`, `Here: "{\"v\":\"\\ud800\"}"`,
		`{"v": "{\"w\": \"\ud800\"}"}`, `{"v": "{\"w\": -0.0}"}`, `{v: 'a\U0001F680', w: 1.0,}`,
	} {
		f.Add(s)
	}
	anyObject, err := Compile(json.RawMessage(`{"type":"object"}`), false)
	if err != nil {
		f.Fatal(err)
	}
	replacement, err := Compile(json.RawMessage(`{"type":"object","properties":{"v":{"const":"\ufffd"},"w":{"type":"object","properties":{"w":{"const":"\ufffd"}}}},"required":["v"]}`), false)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, args string) {
		for _, p := range []*Params{anyObject, replacement} {
			v, _, err := p.ParseValue(args, RepairOptions{})
			if err != nil {
				if _, ok := err.(*SyntaxError); ok && len(err.Error()) > MaxMessageBytes {
					t.Fatalf("ParseValue(%q): a refusal of %d bytes", args, len(err.Error()))
				}
				continue
			}
			data, err := v.JSON()
			if err != nil {
				t.Fatalf("ParseValue(%q): the value does not encode: %v", args, err)
			}
			if got := decodeUseNumber(data); !sameValue(got, v.V) {
				t.Fatalf("ParseValue(%q): the tool's JSON %q decodes to %#v, %#v was validated", args, data, got, v.V)
			}
			again, err := json.Marshal(v.V)
			if err != nil || !sameValue(decodeUseNumber(again), v.V) {
				t.Fatalf("ParseValue(%q): %#v encodes as %q (%v), which is another value", args, v.V, again, err)
			}
			if p == replacement && !strings.Contains(args, "\ufffd") && !strings.Contains(strings.ToLower(args), `ufffd`) {
				t.Fatalf("ParseValue(%q): a U+FFFD the model did not send was validated", args)
			}
		}
	})
}
