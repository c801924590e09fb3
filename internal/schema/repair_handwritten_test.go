package schema

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// handCase is an argument text written by hand, independently of the
// ladder and of corpusgen, from what models are reported to send. want is
// the one right value as JSON, or "" when the text must be refused; cut
// says the refusal must call the text cut off.
type handCase struct {
	class string
	args  string
	want  string
	cut   bool
}

const fence = "```"

func refuse(class, args string) handCase { return handCase{class: class, args: args} }
func cutOff(args string) handCase        { return handCase{class: "cut", args: args, cut: true} }

var handCases = []handCase{
	// Fences.
	{"fences", fence + "json\n{\"path\": \"/etc/hosts\"}\n" + fence, `{"path":"/etc/hosts"}`, false},
	{"fences", fence + "JSON\n{\"a\":1}" + fence, `{"a":1}`, false},
	{"fences", fence + "\n{\"a\":1}\n" + fence + "\n", `{"a":1}`, false},
	{"fences", fence + "json\n{\"a\":1}", `{"a":1}`, false},
	{"fences", "\n\n" + fence + "json\r\n{\"a\":1}\r\n" + fence + "\r\n", `{"a":1}`, false},
	{"fences", fence + "json\n{\"md\": \"" + fence + "py\\nprint(1)\\n" + fence + "\",}\n" + fence, `{"md":"` + fence + `py\nprint(1)\n` + fence + `"}`, false},
	{"fences", fence + "json\n{'a': '" + fence + "'}\n" + fence, `{"a":"` + fence + `"}`, false},

	// Prose.
	{"prose", `Here are the arguments: {"q": "weather in Paris"}`, `{"q":"weather in Paris"}`, false},
	{"prose", "{\"q\": \"x\"}\n\nLet me know if you need anything else!", `{"q":"x"}`, false},
	{"prose", `I'll call the tool with {"path": "a.txt"}.`, `{"path":"a.txt"}`, false},
	{"prose", "Sure! I'll search for that.\n" + fence + "json\n{\"q\":\"x\"}\n" + fence + "\nThis will find it.", `{"q":"x"}`, false},
	{"prose", `Use {braces} like {this}: {"a": "b"}`, `{"a":"b"}`, false},
	{"prose", `{"a":1} (the {name} placeholder is filled later)`, `{"a":1}`, false},
	{"prose", "Thought: I need the file.\nAction Input: {\"path\": \"x\"}", `{"path":"x"}`, false},
	{"prose", `search({"q": "x"})`, `{"q":"x"}`, false},
	{"prose", `Here is the call (note the limit: {"a": 1})`, `{"a":1}`, false},
	{"prose", `Use '{' to open: {"a": 1}`, `{"a":1}`, false},
	refuse("prose", `{"a": 1}{"b": 2}`),
	refuse("prose", `{"a":1} or maybe {"a":2}`),
	refuse("prose", `[{"a":1}]x`),
	refuse("prose", `["x", {"a":1}] and more`),
	// An object nested in a larger value that does not parse is not the
	// arguments: taking it alone drops the rest.
	refuse("prose", `{ "a" = "x", "b" = {"c": 2} }`),
	refuse("prose", `{ a => 1, b => {"c": 2} }`),
	refuse("prose", `f(a=1, b={"c": 2})`),

	// BOM and spaces.
	{"bom", "\ufeff{\"a\":1}", `{"a":1}`, false},
	{"bom", "\ufeff  {\"a\":1,}", `{"a":1}`, false},
	{"bom", "\ufeff\"{\\\"a\\\":1}\"", `{"a":1}`, false},
	{"unicode_spaces", "{\"a\":\u00a01,\u200b\"b\": 2}", `{"a":1,"b":2}`, false},
	{"unicode_spaces", "{\"a\": \"x\u00a0y\"}", `{"a":"x\u00a0y"}`, false},

	// Template tokens and tool-call tags.
	{"template_tokens", `{"a":1}<|call|>`, `{"a":1}`, false},
	{"template_tokens", `{"a":1}<|endoftext|>`, `{"a":1}`, false},
	{"template_tokens", "{\"a\":1}<|im_end|>\n", `{"a":1}`, false},
	{"template_tokens", `<|python_tag|>{"a":1}<|eom_id|>`, `{"a":1}`, false},
	{"template_tokens", `<|start|>assistant<|channel|>commentary to=functions.shell <|constrain|>json<|message|>{"cmd":["ls","-la"]}<|call|>`, `{"cmd":["ls","-la"]}`, false},
	{"template_tokens", `{"a":"<|call|> is a token"}<|call|>`, `{"a":"<|call|> is a token"}`, false},
	{"template_tokens", `<|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>{"q":"x"}<|tool_call_end|>`, `{"q":"x"}`, false},
	{"template_tokens", "<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n" + fence + "json\n{\"q\":\"x\"}\n" + fence + "<｜tool▁call▁end｜>", `{"q":"x"}`, false},
	{"template_tokens", `[TOOL_CALLS]search[ARGS]{"q":"x"}`, `{"q":"x"}`, false},
	{"template_tokens", "{\"a\":1}</s>", `{"a":1}`, false},
	{"template_tokens", `[TOOL_CALLS]{"a": 1}[/TOOL_CALLS]`, `{"a":1}`, false},
	{"unicode_spaces", "{\"a\": 1}\u00a0", `{"a":1}`, false},
	{"unicode_spaces", "{\"a\": 1}\u200b<|call|>", `{"a":1}`, false},
	{"tool_call_tags", "<tool_call>\n{\"a\": 1}\n</tool_call>", `{"a":1}`, false},
	{"tool_call_tags", "<tool_call>{\"a\": 1}</tool_call><|im_end|>", `{"a":1}`, false},
	{"tool_call_tags", "<arguments>{\"a\": \"</arguments>\"}</arguments>", `{"a":"</arguments>"}`, false},

	// Trailing commas.
	{"trailing_commas", `{"a":1,}`, `{"a":1}`, false},
	{"trailing_commas", "{\"a\":[1,2,3,],\n}", `{"a":[1,2,3]}`, false},
	{"trailing_commas", `{"a":{"b":[{"c":1,},],},}`, `{"a":{"b":[{"c":1}]}}`, false},
	{"trailing_commas", `{"a":"x," ,}`, `{"a":"x,"}`, false},
	refuse("trailing_commas", `{"a":1,,}`),
	refuse("trailing_commas", `{"a":[1,,2]}`),
	refuse("trailing_commas", `{,"a":1}`),
	refuse("trailing_commas", `{"a":[,1]}`),

	// Comments.
	{"comments", "{\n  // the file\n  \"path\": \"x\" // the path\n}", `{"path":"x"}`, false},
	{"comments", `{/* a */"a":/* b */1/* c */}`, `{"a":1}`, false},
	{"comments", `{"url": "https://example.com/a//b", "g": "/* no */",}`, `{"url":"https://example.com/a//b","g":"/* no */"}`, false},
	{"comments", "{\"a\": 1} // done", `{"a":1}`, false},
	{"comments", "// arguments\n{\"a\": 1}", `{"a":1}`, false},
	// A line comment that swallows the closing brace leaves the object open.
	cutOff(`{"a": 1 // the end}`),
	cutOff(`{"a": 1 /* unterminated }`),

	// Unquoted keys.
	{"unquoted_keys", `{path: "/tmp", recursive: true}`, `{"path":"/tmp","recursive":true}`, false},
	{"unquoted_keys", `{_private: 1, $ref: "x", camelCase2: 3}`, `{"_private":1,"$ref":"x","camelCase2":3}`, false},
	{"unquoted_keys", "{\n  query: 'x',\n  limit: 10,\n}", `{"query":"x","limit":10}`, false},
	refuse("unquoted_keys", `{1a: 1}`),
	refuse("unquoted_keys", `{file path: "x"}`),

	// Single quotes.
	{"single_quotes", `{'a': 'b'}`, `{"a":"b"}`, false},
	{"single_quotes", `{'html': '<div class="x">é</div>'}`, `{"html":"<div class=\"x\">é</div>"}`, false},
	{"single_quotes", `{'a': 'x\ny\t\u00e9\\'}`, `{"a":"x\ny\té\\"}`, false},
	{"single_quotes", `{'a': 'x\"y'}`, `{"a":"x\"y"}`, false},
	{"single_quotes", `{"msg": "it's fine", 'b': 'ok'}`, `{"msg":"it's fine","b":"ok"}`, false},
	refuse("single_quotes", `{'msg': 'it's broken'}`),
	refuse("single_quotes", `{'msg': 'don't', 'x': 'y'}`),

	// Python literals.
	{"python_literals", `{"a": True, "b": False, "c": None}`, `{"a":true,"b":false,"c":null}`, false},
	{"python_literals", `{"a": [True, None, False]}`, `{"a":[true,null,false]}`, false},
	{"python_literals", `{'s': 'True', 'n': None}`, `{"s":"True","n":null}`, false},
	refuse("python_literals", `{"a": NaN}`),
	refuse("python_literals", `{"a": Infinity}`),
	refuse("python_literals", `{"a": undefined}`),
	refuse("python_literals", `{"a": TRUE}`),

	// An extra closing brace, one redundant pair of braces.
	{"extra_closer", `{"a":1}}`, `{"a":1}`, false},
	{"extra_closer", "{\"a\":{\"b\":[1]}}}\n", `{"a":{"b":[1]}}`, false},
	{"extra_closer", "{\"a\":1}}<|call|>", `{"a":1}`, false},
	{"extra_closer", "{\"a\": 1}}\n\nLet me know if that works.", `{"a":1}`, false},
	{"extra_closer", `{"a": 1}} Done.`, `{"a":1}`, false},
	// A '}' too many in the middle closes the object early: the members
	// after it must not be dropped.
	refuse("extra_closer", `{"query": {"term": "x"}}, "size": 10}`),
	refuse("extra_closer", `{"a": 1}, "b": 2}`),
	refuse("extra_closer", `{"a": {"b": 1}}}, "c": 2}`),
	refuse("extra_closer", `{"a": 1} "b": 2}`),
	refuse("extra_closer", "{\"a\": 1}\n  \"b\": [2]\n}"),
	refuse("extra_closer", `{"a": 1}: 2`),
	{"wrapping_braces", `{{"a":1}}`, `{"a":1}`, false},
	{"wrapping_braces", "{\n  {\"a\": {\"b\": 2}}\n}", `{"a":{"b":2}}`, false},
	{"wrapping_braces", `{{'a': True,}}`, `{"a":true}`, false},
	refuse("wrapping_braces", `{{{"a":1}}}`),
	refuse("wrapping_braces", `{{"a":1}, {"b":2}}`),

	// Double-encoded.
	{"double_encoded", `"{\"command\": \"ls -la\"}"`, `{"command":"ls -la"}`, false},
	{"double_encoded", `"{\"text\": \"a\\nb \\\"q\\\" \\\\ \\u00e9\"}"`, `{"text":"a\nb \"q\" \\ é"}`, false},
	{"double_encoded", ` "{\"a\": [1, 2]}" `, `{"a":[1,2]}`, false},
	{"double_encoded", `"{\"a\": 1}"<|call|>`, `{"a":1}`, false},
	{"double_encoded", fence + "json\n\"{\\\"a\\\": 1}\"\n" + fence, `{"a":1}`, false},
	refuse("double_encoded", `"{\"a\": 1} {\"b\": 2}"`),
	{"double_encoded", `<tool_call>"{\"a\": 1}"</tool_call>`, `{"a":1}`, false},
	{"double_encoded", `<|channel|>commentary to=functions.f <|constrain|>json<|message|>"{\"a\": 1}"<|call|>`, `{"a":1}`, false},

	// Raw control characters.
	{"control_chars", "{\"content\": \"line 1\nline 2\n\"}", `{"content":"line 1\nline 2\n"}`, false},
	{"control_chars", "{\"a\": \"col1\tcol2\r\n\"}", `{"a":"col1\tcol2\r\n"}`, false},
	{"control_chars", "{\"a\": \"x\x00y\x1f\"}", `{"a":"x\u0000y\u001f"}`, false},
	{"control_chars", "{'a': 'x\ny'}", `{"a":"x\ny"}`, false},

	// Invalid escapes kept as backslash and character.
	{"invalid_escapes", `{"regex": "^\d{3}-\d{4}$"}`, `{"regex":"^\\d{3}-\\d{4}$"}`, false},
	{"invalid_escapes", `{"pattern": "\w+\s*\.\(\)"}`, `{"pattern":"\\w+\\s*\\.\\(\\)"}`, false},
	{"invalid_escapes", `{"path": "C:\Users\me\Documents"}`, `{"path":"C:\\Users\\me\\Documents"}`, false},
	// \x41 is A in Python and JavaScript, \u12 is incomplete: refused.
	refuse("invalid_escapes", `{"a": "\x41 \u12 z"}`),
	refuse("invalid_escapes", `{"a": "\u12 z"}`),
	{"invalid_escapes", `{"a": "\xyz \users"}`, `{"a":"\\xyz \\users"}`, false},
	{"invalid_escapes", `{"a": "\d\"\\\n\/\u00e9"}`, `{"a":"\\d\"\\\n/é"}`, false},
	// \a is BEL in Python and C, an a in JavaScript: refused (\b is JSON's backspace).
	refuse("invalid_escapes", `{"latex": "\alpha + \beta"}`),

	// Missing comma between members.
	{"missing_commas", `{"a":1 "b":2}`, `{"a":1,"b":2}`, false},
	{"missing_commas", "{\"message\": \"Line one\\nLine two\\tTabbed\" \"channel\": \"#ops\"}", `{"message":"Line one\nLine two\tTabbed","channel":"#ops"}`, false},
	{"missing_commas", "{\n\"a\": {\"b\": 1}\n\"c\": [2]\n\"d\": true\n}", `{"a":{"b":1},"c":[2],"d":true}`, false},
	refuse("missing_commas", `{"a": "He said "hi" to me"}`),
	refuse("missing_commas", `{"cmd": "echo "a b" > f"}`),
	refuse("missing_commas", `{"a": ["x" "y"]}`),

	// Combinations.
	{"combined", fence + "json\n{\n  // search\n  query: 'golang generics',\n  'limit': 5,\n  safe: True,\n}\n" + fence, `{"query":"golang generics","limit":5,"safe":true}`, false},
	{"combined", "<tool_call>\n{{\"path\": \"C:\\temp\\new\", \"n\": 2,}}\n</tool_call>", `{"path":"C:\temp\new","n":2}`, false},
	{"combined", "\ufeffHere:\n{\"a\": \"x\ny\" \"b\": None}}", `{"a":"x\ny","b":null}`, false},
	{"combined", "Sure, calling it now:\n" + fence + "json\n{\"a\": 1}}\n" + fence, `{"a":1}`, false},
	refuse("combined", `Use {x = {"a": 1}}`),
	refuse("combined", `Use [x, {"a": 1}]]`),

	// Unicode and big values.
	{"unicode", `{"t": "日本語 🎉 \ud83d\ude00 \u00e9",}`, `{"t":"日本語 🎉 😀 é"}`, false},
	{"unicode", `{'名前': 'テスト'}`, `{"名前":"テスト"}`, false},
	{"numbers", `{"a": -0.5e-3, "b": 12345678901234567890, "c": 1E+2,}`, `{"a":-0.5e-3,"b":12345678901234567890,"c":1E+2}`, false},
	refuse("numbers", `{"a": 01}`),
	refuse("numbers", `{"a": +1}`),
	refuse("numbers", `{"a": .5}`),
	refuse("numbers", `{"a": 0x10}`),
	refuse("numbers", `{"a": 1_000}`),
	refuse("numbers", `{"a": 1.}`),

	// Truncations at every kind of position.
	cutOff(`{"query": "SELECT * FROM users WHE`),
	cutOff(`{"html": "<div class=\"a`),
	cutOff(`{"max_bytes": 20`),
	cutOff(`{"max_bytes": 20.`),
	cutOff(`{"max_bytes": 2e`),
	cutOff(`{"max_bytes": -`),
	cutOff(`{"ok": tr`),
	cutOff(`{"ok": Tru`),
	cutOff(`{"ok": N`),
	cutOff(`{"ok": true`),
	cutOff(`{"pa`),
	cutOff(`{pa`),
	cutOff(`{"path"`),
	cutOff(`{"path":`),
	cutOff(`{"path": `),
	cutOff(`{"a": 1,`),
	cutOff(`{"a": 1, `),
	cutOff(`{"a": [1, 2`),
	cutOff(`{"a": [1, 2,`),
	cutOff(`{"a": {"b": 1}`),
	cutOff(`{"a": "x\`),
	cutOff(`{"a": "x\u00`),
	cutOff("{\"a\": \"caf\xc3"),
	cutOff("{\"a\": \"\xf0\x9f\x8e"),
	cutOff(`{"a": 1 /`),
	cutOff(`{"a": 1 /*`),
	cutOff(`{`),
	cutOff(`{{"a": 1}`),
	cutOff(`{"a": 1}` + "\n" + `{"b"`),
	cutOff(`{"a": 1}{`),
	cutOff(`{"a": 1} {`),
	cutOff(`{"a": 1}{"b": [1`),
	cutOff(fence + "json\n{\"a\": \"x"),
	cutOff(fence + "json\n{\"a\": 12\n" + fence),
	cutOff(`{"a": 1, <|call|>`),
	cutOff(`{"a": 1<|call|>`),
	cutOff("{\"a\": 1, </tool_call>"),
	cutOff("{\"a\": 1, <｜tool▁call▁end｜>"),
	cutOff(`Here: {"path": "/tmp/`),
	cutOff(`"{\"a\": 1`),
	cutOff(`"{\"a\": \"x`),
	cutOff(`"{\"a\": 1"`),
	cutOff(`{'a': 'x`),
	cutOff(`{"a": 'x`),
	cutOff(`{"a": "x"` + " \n\t "),
}

// TestRepairHandwritten holds the ladder to hand-written cases: recovered
// exactly (and passing the differential check), or refused, a cut called a
// cut, on non-destructive and destructive tools alike.
func TestRepairHandwritten(t *testing.T) {
	p, err := Compile([]byte(`{"type":"object"}`), false)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ n, recovered, refused, wrong, cut int }
	table := map[string]*row{}
	for i, c := range handCases {
		for _, destructive := range []bool{false, true} {
			name := fmt.Sprintf("%d %s %q destructive=%v", i, c.class, c.args, destructive)
			r := table[c.class]
			if r == nil {
				r = &row{}
				table[c.class] = r
			}
			r.n++
			v, rungs, err := p.ParseValue(c.args, RepairOptions{Conservative: destructive})
			switch {
			case err != nil && c.want == "":
				r.refused++
				if c.cut && !errors.Is(err, ErrTruncated) {
					t.Errorf("%s: refused, but not as cut off: %v", name, err)
				}
				var se *SyntaxError
				if errors.As(err, &se) {
					checkSentence(t, name, err.Error())
				}
			case err != nil:
				r.refused++
				t.Errorf("%s: refused (rungs %q): %v", name, rungs, err)
			case c.want == "" && c.cut:
				r.cut++
				t.Errorf("%s: a cut text ran (rungs %q): %v", name, rungs, v.V)
			case c.want == "":
				r.wrong++
				t.Errorf("%s: ran (rungs %q) %v, want a refusal", name, rungs, v.V)
			case !sameValue(v.V, decodeNumbers(t, []byte(c.want))):
				r.wrong++
				t.Errorf("%s: ran (rungs %q) %v, want %s", name, rungs, v.V, c.want)
			default:
				r.recovered++
				if data, _, _ := Repair(c.args, RepairOptions{Conservative: destructive}); data != nil {
					if err := differential(c.args, data); err != nil {
						t.Errorf("%s: %v", name, err)
					}
				}
				// Cut anywhere, the text either runs the same value (the
				// cut fell in what follows the object) or is refused. (A
				// blank text is no arguments: {} by design.)
				for k := 1; k < len(c.args); k++ {
					if trimJSONSpace(c.args[:k]) == "" {
						continue
					}
					if pv, _, err := p.ParseValue(c.args[:k], RepairOptions{Conservative: destructive}); err == nil && !sameValue(pv.V, v.V) {
						t.Errorf("%s: cut to %q it ran %v", name, c.args[:k], pv.V)
					}
				}
			}
		}
	}
	classes := make([]string, 0, len(table))
	for c := range table {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	var b strings.Builder
	fmt.Fprintf(&b, "%-18s %5s %9s %7s %5s %4s\n", "class", "runs", "recovered", "refused", "wrong", "cut")
	for _, c := range classes {
		r := table[c]
		fmt.Fprintf(&b, "%-18s %5d %9d %7d %5d %4d\n", c, r.n, r.recovered, r.refused, r.wrong, r.cut)
	}
	t.Logf("hand-written cases:\n%s", b.String())
}

// TestRepairNestedDoubleEncoded: a string where the schema wants an object
// or an array, holding exactly one, is read as that value (some providers
// send nested values so); a string the schema accepts stays a string, and
// a string that does not hold a valid value is refused as sent.
func TestRepairNestedDoubleEncoded(t *testing.T) {
	p, err := Compile([]byte(`{"type":"object","properties":{
		"todos":{"type":"array","items":{"type":"object","properties":{"content":{"type":"string"}},"required":["content"]}},
		"opts":{"type":"object"},
		"name":{"type":"string"}},"additionalProperties":false}`), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args, want string
		rungs      []string
	}{
		{`{"todos": "[{\"content\": \"a \\\"b\\\" \\u00e9\"}]", "name": "n"}`, `{"todos":[{"content":"a \"b\" é"}],"name":"n"}`, []string{RungDoubleEncoded}},
		{`{"opts": "{\"a\": 1.50}"}`, `{"opts":{"a":1.50}}`, []string{RungDoubleEncoded}},
		{`{"name": "{\"a\": 1}"}`, `{"name":"{\"a\": 1}"}`, nil},
		{`{"opts": " {\"a\": [1]} ",}`, `{"opts":{"a":[1]}}`, []string{RungDoubleEncoded, RungTrailingCommas}},
		{`"{\"todos\": \"[]\"}"`, `{"todos":[]}`, []string{RungDoubleEncoded}},
		{`{"opts": "{bad}"}`, "", nil},
		{`{"opts": "{\"a\": 1} x"}`, "", nil},
		{`{"opts": "{\"a\": 1, \"a\": 2}"}`, "", nil},
		{`{"todos": "[{\"content\": 1}]"}`, "", nil},
		{`{"todos": "[{\"content\": \"x\"}]", "name": 5}`, "", nil},
		{`{"opts": "[1]"}`, "", nil},
	} {
		for _, destructive := range []bool{false, true} {
			v, rungs, err := p.ParseValue(c.args, RepairOptions{Conservative: destructive})
			switch {
			case c.want == "" && err == nil:
				t.Errorf("%s: ran %v, want a refusal", c.args, v.V)
			case c.want == "":
			case err != nil:
				t.Errorf("%s: %v", c.args, err)
			case !sameValue(v.V, decodeNumbers(t, []byte(c.want))) || strings.Join(rungs, ",") != strings.Join(c.rungs, ","):
				t.Errorf("%s: ran %v with %q, want %s with %q", c.args, v.V, rungs, c.want, c.rungs)
			default:
				if data, err := v.JSON(); err != nil || !sameValue(decodeNumbers(t, data), v.V) {
					t.Errorf("%s: JSON %s, %v", c.args, data, err)
				}
			}
		}
	}
}
