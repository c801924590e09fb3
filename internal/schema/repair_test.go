package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// repairCase is one input the ladder must read. It doubles as the fuzz seed
// corpus (see FuzzRepair).
type repairCase struct {
	name  string
	in    string
	want  string   // JSON whose decoded value the repaired output must equal
	rungs []string // expected rungs, nil when the input parses as sent
}

func r(names ...string) []string { return names }

var repairCorpus = []repairCase{
	// As sent.
	{"valid", `{"path":"/tmp/x","n":1}`, `{"path":"/tmp/x","n":1}`, nil},
	{"valid with surrounding whitespace", " \n\t{\"a\":[1,2]}\r\n", `{"a":[1,2]}`, nil},
	{"valid non-object is left to the schema", `[1,2]`, `[1,2]`, nil},
	{"valid string that is no object", `"ls -la"`, `"ls -la"`, nil},
	{"empty", ``, `{}`, nil},
	{"blank", " \n\t\r ", `{}`, nil},

	// strip_fences: BOM, fences, prose, template tokens, tool-call tags.
	{"bom", "\uFEFF{\"a\":1}", `{"a":1}`, r(RungStripFences)},
	{"fenced json", "```json\n{\"query\":\"golang\"}\n```", `{"query":"golang"}`, r(RungStripFences)},
	{"fenced without language", "```\n{\"a\":{\"b\":true}}\n```", `{"a":{"b":true}}`, r(RungStripFences)},
	{"indented fence", "  ```json\n  {\"a\":1}\n  ```", `{"a":1}`, r(RungStripFences)},
	{"prose before and after", "Sure! Here are the arguments: {\"q\":\"go\",\"limit\":5} Let me know if you need more.", `{"q":"go","limit":5}`, r(RungStripFences)},
	{"prose with braces in strings", `Calling: {"a":"}{ ` + "```" + ` \"}"} done`, `{"a":"}{ ` + "```" + ` \"}"}`, r(RungStripFences)},
	{"unterminated fence", "```json\n{\"a\":1}", `{"a":1}`, r(RungStripFences)},
	{"prose with braces before a fence", "Call {tool} with:\n```json\n{\"a\":1}\n```\nThanks.", `{"a":1}`, r(RungStripFences)},
	{"prose with a placeholder after", "```json\n{\"a\":1}\n```\nThis fills {name} in.", `{"a":1}`, r(RungStripFences)},
	{"stray closing fence", "{\"a\":\"b\"}\n```", `{"a":"b"}`, r(RungStripFences)},
	{"prose with a quoted brace before", `Use '{' to open an object: {"a":1}`, `{"a":1}`, r(RungStripFences)},
	{"template token after", `{"a":1}<|call|>`, `{"a":1}`, r(RungStripFences)},
	{"end of text token", "{\"a\":1}\n<|endoftext|>", `{"a":1}`, r(RungStripFences)},
	{"harmony header", `<|channel|>commentary to=functions.run <|constrain|>json<|message|>{"a":1}<|call|>`, `{"a":1}`, r(RungStripFences)},
	{"tool_call tags", "<tool_call>\n{\"a\":1}\n</tool_call>", `{"a":1}`, r(RungStripFences)},
	{"fence inside a string is content", "{\"md\":\"```go\\nx\\n```\"}\n```", `{"md":"` + "```go\\nx\\n```" + `"}`, r(RungStripFences)},

	// double_encoded.
	{"double encoded", `"{\"command\": \"ls -la\", \"timeout\": 30}"`, `{"command":"ls -la","timeout":30}`, r(RungDoubleEncoded)},
	{"double encoded with escapes", `"{\"text\": \"a \\\"b\\\"\\n\"}"`, `{"text":"a \"b\"\n"}`, r(RungDoubleEncoded)},
	{"double encoded and repaired", `"{'a': 1,}"`, `{"a":1}`, r(RungDoubleEncoded, RungTrailingCommas, RungSingleQuotes)},
	{"double encoded after a bom", "\uFEFF\"{\\\"a\\\":1}\"", `{"a":1}`, r(RungStripFences, RungDoubleEncoded)},

	// wrapping_braces, extra_closer.
	{"wrapping braces", `{{"a":1,"b":"x"}}`, `{"a":1,"b":"x"}`, r(RungWrappingBraces)},
	{"wrapping braces with space", "{ {\"a\":1} }", `{"a":1}`, r(RungWrappingBraces)},
	{"extra closer", `{"a":1}}`, `{"a":1}`, r(RungExtraCloser)},
	{"extra closers of both kinds", `{"a":1}]}`, `{"a":1}`, r(RungExtraCloser)},

	// Syntax rungs.
	{"trailing comma", `{"a":1,}`, `{"a":1}`, r(RungTrailingCommas)},
	{"trailing commas nested", `{"a":[1,2,],"b":{"c":3,},}`, `{"a":[1,2],"b":{"c":3}}`, r(RungTrailingCommas)},
	{"line comment", "{\n  // the path\n  \"a\": 1\n}", `{"a":1}`, r(RungComments)},
	{"block comment", `{"a": 1 /* one */, "b": 2}`, `{"a":1,"b":2}`, r(RungComments)},
	{"comment markers in strings are content", `{"url": "http://x/*y*/", "b": 1,}`, `{"url":"http://x/*y*/","b":1}`, r(RungTrailingCommas)},
	{"missing comma", `{"a":1 "b":2}`, `{"a":1,"b":2}`, r(RungMissingCommas)},
	{"missing comma on a new line", "{\n \"a\": \"x\"\n \"b\": [1]\n}", `{"a":"x","b":[1]}`, r(RungMissingCommas)},
	{"unquoted keys", `{a: 1, b_2: "x", max-bytes: 3}`, `{"a":1,"b_2":"x","max-bytes":3}`, r(RungUnquotedKeys)},
	{"single quotes", `{'a': 'b', 'c': ['d'], 'q': 'say "hi"'}`, `{"a":"b","c":["d"],"q":"say \"hi\""}`, r(RungSingleQuotes)},
	{"escaped apostrophe in single quotes", `{'a': 'it\'s'}`, `{"a":"it's"}`, r(RungSingleQuotes)},
	{"python literals", `{"a": True, "b": False, "c": None}`, `{"a":true,"b":false,"c":null}`, r(RungPythonLiterals)},
	{"python dict", `{'path': '/tmp/x', 'recursive': True, 'depth': None}`, `{"path":"/tmp/x","recursive":true,"depth":null}`, r(RungSingleQuotes, RungPythonLiterals)},
	{"raw newline and tab", "{\"content\": \"line one\nline two\tend\"}", `{"content":"line one\nline two\tend"}`, r(RungControlChars)},
	{"raw control character", "{\"a\": \"x\x01y\"}", `{"a":"x\u0001y"}`, r(RungControlChars)},
	{"invalid escape", `{"regex": "^\d{3}-\d{4}$"}`, `{"regex":"^\\d{3}-\\d{4}$"}`, r(RungInvalidEscapes)},
	{"invalid unicode escape", `{"path": "C:\users\x"}`, `{"path":"C:\\users\\x"}`, r(RungInvalidEscapes)},

	{"unicode spaces between tokens", "{\u00a0\"a\":\u200b1,\u3000\"b\": \"x\u00a0y\"}", `{"a":1,"b":"x\u00a0y"}`, r(RungUnicodeSpaces)},

	// The examples, whose escapes a library corrupted.
	{"escaped quotes and a trailing comma", `{"html": "<div class=\"a\">…</div>",}`, `{"html":"<div class=\"a\">…</div>"}`, r(RungTrailingCommas)},
	{"escapes and a missing comma", `{"message": "Line one\nLine two\tTabbed" "channel": "#ops"}`, `{"message":"Line one\nLine two\tTabbed","channel":"#ops"}`, r(RungMissingCommas)},

	// Several at once.
	{"fenced python dict", "```python\n{'a': 1, 'b': True,}\n```", `{"a":1,"b":true}`, r(RungStripFences, RungTrailingCommas, RungSingleQuotes, RungPythonLiterals)},
	{"json5-ish", "{\n  // c\n  a: 'x',\n  b: [1, 2,],\n}", `{"a":"x","b":[1,2]}`, r(RungComments, RungTrailingCommas, RungUnquotedKeys, RungSingleQuotes)},
}

func decode(t testing.TB, data []byte) any {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return v
}

func TestRepairCorpus(t *testing.T) {
	for _, tc := range repairCorpus {
		for _, conservative := range []bool{false, true} {
			got, rungs, err := Repair(tc.in, RepairOptions{Conservative: conservative})
			if err != nil {
				t.Errorf("%s: Repair(%q): %v", tc.name, tc.in, err)
				continue
			}
			if g, w := decode(t, got), decode(t, []byte(tc.want)); !reflect.DeepEqual(g, w) {
				t.Errorf("%s: Repair(%q) = %s, want %s", tc.name, tc.in, got, tc.want)
			}
			if !slices.Equal(rungs, tc.rungs) {
				t.Errorf("%s: Repair(%q) rungs = %q, want %q", tc.name, tc.in, rungs, tc.rungs)
			}
			if err := differential(tc.in, got); err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		}
	}
}

// refusalCase is an input with no single complete reading.
type refusalCase struct {
	name      string
	in        string
	truncated bool
	mention   []string // the message names these
}

var refusalCorpus = []refusalCase{
	{"prose only", "I cannot call this tool.", false, []string{"no JSON object"}},
	{"lone minus", "-", false, nil},
	{"only closers", "}}", false, nil},
	{"object inside a broken array", `[{"a":1},`, false, []string{"byte 1"}},
	{"object after a key", `{x "a": {"b":1}}`, false, nil},
	{"two objects", `{"a":1} {"a":2}`, false, []string{"more than one", "byte 8"}},
	{"a second attempt", `{"a":1}{"a":`, true, []string{"more than one"}},
	{"nested too deep", strings.Repeat("[", MaxDepth+1), false, nil},
	{"object too deep", strings.Repeat(`{"a":`, MaxDepth+1), false, []string{"more than 512 levels"}},
	{"unquoted value", `{"command": rm -rf /tmp/x}`, false, []string{"byte 12", `unquoted text "rm"`}},
	{"apostrophe inside single quotes", `{'a': 'it's'}`, false, []string{"byte 10"}},
	{"ambiguous apostrophe escape", `{"a": "it\'s"}`, false, []string{`\'`, "/a"}},
	{"unescaped inner quotes", `{"html": "<div class="a">x</div>"}`, false, []string{"byte 22"}},
	{"missing comma in an array", `{"a": ["x" "y"]}`, false, []string{"/a/0"}},
	{"leading zero", `{"a": 012}`, false, []string{"leading zero"}},
	{"text glued to the object", `{"cmd":"echo "}abc"}`, false, []string{"byte 15", `escape the string's quotes as \"`}},
	{"a closer for the wrong container", `{"a":[1,2}`, false, []string{"/a"}},
	{"an extra closer inside", `{"a":[1,2]],"b":3}`, false, nil},
	{"double comma", `{"a":1,,"b":2}`, false, nil},
	{"object in a broken value", `{"a": foo, "b": {"c": 1}}`, false, []string{"byte 6"}},

	// Cut off: at every kind of position, refused on every tool.
	{"cut in a string", `{"query":"SELECT * FROM us`, true, []string{"byte 26", "inside a string at /query"}},
	{"cut in a number", `{"max_bytes":20`, true, []string{"byte 15", "a number at /max_bytes"}},
	{"cut after a fraction point", `{"a":1.`, true, []string{"a number"}},
	{"cut in a literal", `{"a":tr`, true, []string{"a literal"}},
	{"cut in a python literal", `{"a":Tru`, true, []string{"a literal"}},
	{"cut in a key", `{"a":1,"pa`, true, []string{"a key"}},
	{"cut in an unquoted key", `{a:1, pa`, true, []string{"a key"}},
	{"cut after a key", `{"a":1,"b"`, true, nil},
	{"cut after a colon", `{"a":1,"b":`, true, []string{"a value at /b"}},
	{"cut after a comma", `{"a":1,`, true, nil},
	{"cut before the last brace", `{"a":1,"b":"x"`, true, []string{"before its closing '}'"}},
	{"cut in an array", `{"a":[1,2`, true, []string{"/a/1"}},
	{"cut after an array element", `{"a":["x","y"`, true, []string{"an array"}},
	{"cut in an escape", `{"a":"x\`, true, nil},
	{"cut in a unicode escape", `{"a":"caf\u00`, true, nil},
	{"cut in a comment", `{"a":1 /* note`, true, []string{"comment"}},
	{"cut in a comment's opening", "{\n  /", true, []string{"comment"}},
	{"only an opening brace", `{`, true, nil},
	{"cut in a fence", "```json\n{\"a\":\"hel\n```", true, nil},
	{"cut wrapped", `{{"a":1}`, true, []string{"outer pair"}},
	// The text ends inside the string that holds the object: cut off.
	{"cut double encoded", `"{\"a\": \"x`, true, nil},
	{"cut inside a double-encoded object", `"{\"a\": \"x"`, true, []string{"JSON string", "cut off"}},
	{"cut mid-UTF-8", "{\"a\":\"caf\xc3", true, nil},
}

func TestRepairRefusals(t *testing.T) {
	for _, tc := range refusalCorpus {
		for _, conservative := range []bool{false, true} {
			got, _, err := Repair(tc.in, RepairOptions{Conservative: conservative})
			if err == nil {
				t.Errorf("%s: Repair(%.60q) = %s, want a refusal", tc.name, tc.in, got)
				continue
			}
			var se *SyntaxError
			if !errors.As(err, &se) || !errors.Is(err, ErrUnparseable) {
				t.Errorf("%s: error %v is not a *SyntaxError wrapping ErrUnparseable", tc.name, err)
			}
			if errors.Is(err, ErrTruncated) != tc.truncated {
				t.Errorf("%s: truncated = %v, want %v: %v", tc.name, !tc.truncated, tc.truncated, err)
			}
			msg := err.Error()
			if tc.truncated && !strings.Contains(msg, "cut off at byte") {
				t.Errorf("%s: %q does not say where it was cut off", tc.name, msg)
			}
			for _, m := range tc.mention {
				if !strings.Contains(msg, m) {
					t.Errorf("%s: %q does not mention %q", tc.name, msg, m)
				}
			}
			checkSentence(t, tc.name, msg)
		}
	}
}

// checkSentence holds a refusal to the form the model reads: one sentence,
// no repetition, valid UTF-8.
func checkSentence(t *testing.T, name, msg string) {
	t.Helper()
	if strings.Count(msg, "not valid JSON") > 1 || strings.Count(msg, "send") > 1 {
		t.Errorf("%s: %q repeats itself", name, msg)
	}
	if !strings.HasSuffix(msg, ".") || strings.Contains(msg, "\n") {
		t.Errorf("%s: %q is not one sentence", name, msg)
	}
	if !json.Valid(mustMarshal(t, msg)) || strings.ContainsRune(msg, '\uFFFD') {
		t.Errorf("%s: %q is not clean UTF-8", name, msg)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRepairExcerptBoundaries checks that the "near" excerpt never cuts a
// multi-byte character.
func TestRepairExcerptBoundaries(t *testing.T) {
	for pad := range 8 {
		in := `{"a": "` + strings.Repeat("é", 10+pad) + `" x "ü` + strings.Repeat("☕", 12) + `"}`
		_, _, err := Repair(in, RepairOptions{})
		if err == nil {
			t.Fatalf("pad %d: repaired %q", pad, in)
		}
		checkSentence(t, "excerpt", err.Error())
	}
	for i := range 40 {
		s := strings.Repeat("aé☕😀", 10)
		if e := excerpt(s, i, 7); !utf8ValidString(e) {
			t.Errorf("excerpt(%d) = %q", i, e)
		}
	}
}

func utf8ValidString(s string) bool {
	return !strings.ContainsRune(strings.ToValidUTF8(s, "\uFFFD"), '\uFFFD')
}

// Realistic tool arguments: about six fields, nesting, escapes, non-ASCII
// text, \u escapes including a surrogate pair, and every literal kind.
var realisticArgs = []string{
	`{"command":"grep -rn \"TODO\" ./src --include=*.go | head -n 20","cwd":"/home/user/project","timeout_ms":30000,"env":{"LANG":"en_US.UTF-8","PATH":"/usr/local/bin:/usr/bin"},"args":["-n","--color=never",""],"dry_run":false,"note":null}`,
	`{"path":"docs/naïve café ☕.md","content":"# Title\n\n\tIndented \"quoted\" text \\ backslash\nemoji 😀, \u00e9 and \ud83d\ude00\n` + "```go" + `\nfmt.Println(1)\n` + "```" + `","mode":420,"ratio":-1.5e-3,"tags":["a","b",{"nested":[1,2.25,true,null,-0,1E+2]}],"append":true}`,
	`{"query":"SELECT * FROM users WHERE name = 'O\u0027Brien'","params":[{"name":"limit","value":10},{"name":"offset","value":0}],"options":{"timeout":5.5,"readonly":true,"labels":{}},"empty":[],"zero":0,"neg":-12.5e-1}`,
}

func indented(t testing.TB, s string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestRepairEveryTruncation cuts realistic arguments at every byte offset,
// bare and inside a fence: every cut is refused as cut off, on every tool.
func TestRepairEveryTruncation(t *testing.T) {
	var docs []string
	for _, s := range realisticArgs {
		docs = append(docs, s, indented(t, s))
	}
	for d, doc := range docs {
		for k := 1; k < len(doc); k++ {
			for _, in := range []string{doc[:k], "```json\n" + doc[:k] + "\n```"} {
				for _, conservative := range []bool{false, true} {
					got, _, err := Repair(in, RepairOptions{Conservative: conservative})
					if !errors.Is(err, ErrTruncated) {
						t.Fatalf("doc %d cut at %d (%q): got %s, %v; want a cut-off refusal", d, k, tail(in), got, err)
					}
				}
			}
		}
	}
}

func tail(s string) string {
	if len(s) > 24 {
		return "…" + s[len(s)-24:]
	}
	return s
}

func TestRungsAreClassified(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Rungs() {
		if r.Class != Lossless && r.Class != Guessing {
			t.Errorf("rung %s has no class", r.Name)
		}
		if seen[r.Name] || r.bit == 0 || r.bit&(r.bit-1) != 0 {
			t.Errorf("rung %s: duplicate or bad bit %b", r.Name, r.bit)
		}
		seen[r.Name] = true
	}
}

func TestRepairSizeLimit(t *testing.T) {
	truncated := `{"a":"` + strings.Repeat("x", 100)
	malformed := truncated + `",}`
	valid := truncated + `"}`

	_, _, err := Repair(malformed, RepairOptions{Limit: 64})
	if !errors.Is(err, ErrArgumentsTooLarge) || errors.Is(err, ErrUnparseable) || !strings.Contains(err.Error(), "byte 109") {
		t.Errorf("over-limit malformed: err = %v, want only ErrArgumentsTooLarge at byte 109", err)
	}
	_, _, err = Repair(truncated, RepairOptions{Limit: 64})
	if !errors.Is(err, ErrArgumentsTooLarge) || !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "cut off at byte 106") {
		t.Errorf("over-limit truncated: err = %v, want a cut off at byte 106", err)
	}
	got, rungs, err := Repair(valid, RepairOptions{Limit: 64})
	if err != nil || string(got) != valid || rungs != nil {
		t.Errorf("over-limit valid: got %.20q, %q, %v; want it as sent", got, rungs, err)
	}
	if _, rungs, err := Repair(malformed, RepairOptions{Limit: len(malformed)}); err != nil || !slices.Equal(rungs, r(RungTrailingCommas)) {
		t.Errorf("at-limit malformed: %q, %v", rungs, err)
	}
	big := `{"a":"` + strings.Repeat("x", DefaultRepairLimit)
	if _, _, err := Repair(big, RepairOptions{}); !errors.Is(err, ErrArgumentsTooLarge) {
		t.Errorf("default limit: err = %v, want ErrArgumentsTooLarge", err)
	}
}

// TestRepairLargeInputs guards against quadratic behaviour: each of these
// 1 MiB inputs, the worst shapes for the reader and the candidate search,
// must be handled with work in proportion to its size: what Repair
// allocates is bounded by maxAllocPerByte bytes for each byte of input
// (BenchmarkRepair measures its time).
func TestRepairLargeInputs(t *testing.T) {
	const maxAllocPerByte = 64
	if testing.Short() {
		t.Skip("large inputs")
	}
	const size = DefaultRepairLimit - 64
	repeat := func(prefix, unit string) string {
		return (prefix + strings.Repeat(unit, (size-len(prefix))/len(unit)+1))[:size]
	}
	cases := []struct {
		name string
		in   string
		ok   bool
	}{
		{"truncated many members", repeat(`{`, `"key":"value \"v\" é",`), false},
		{"single quotes, many members", "{" + strings.Repeat(`'k': 'v', `, size/10) + "'k': 'v'}", true},
		{"raw newlines", repeat(`{"a":"`, "line\n")[:size-2] + `"}`, true},
		{"missing commas", repeat(`{"a":[`, `1 `), false},
		{"braces everywhere", repeat(`x`, `{`), false},
		{"keys with braces", repeat(`x`, `{"{{{{{{{{{{{{{{{{`), false},
		{"truncated deep nesting", repeat(`{"a":`, `[`), false},
		{"many fences", repeat(`{`, "\n```"), false},
		{"stray closers", repeat(`{"a":1`, `}]`), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			got, _, err := Repair(tc.in, RepairOptions{})
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			if (err == nil) != tc.ok {
				t.Errorf("err = %.200v, want success %v", err, tc.ok)
			}
			if err == nil && !json.Valid(got) {
				t.Errorf("invalid output")
			}
			// Work that grows faster than the input shows in what it
			// allocates, which, unlike its time, does not depend on the
			// machine's load.
			if allocated > maxAllocPerByte*uint64(len(tc.in)) {
				t.Errorf("allocated %d bytes for %d of input, over %d a byte", allocated, len(tc.in), maxAllocPerByte)
			}
			t.Logf("allocated %.1f bytes a byte of input", float64(allocated)/float64(len(tc.in)))
		})
	}
}

func TestRepairDoubleEncodedPackaged(t *testing.T) {
	for in, want := range map[string][]string{
		`"{\"a\":1}"<|call|>`:             r(RungStripFences, RungDoubleEncoded),
		`'{"a": 1}'`:                      r(RungDoubleEncoded, RungSingleQuotes),
		"\"{\\\"a\\\":1}\"\n\nDone.":      r(RungStripFences, RungDoubleEncoded),
		`"{'a': 1,}"` + "\n<|endoftext|>": r(RungStripFences, RungDoubleEncoded, RungTrailingCommas, RungSingleQuotes),
	} {
		got, rungs, err := Repair(in, RepairOptions{})
		if err != nil || !reflect.DeepEqual(decode(t, got), decode(t, []byte(`{"a":1}`))) || !slices.Equal(rungs, want) {
			t.Errorf("Repair(%q) = %s, %q, %v; want {\"a\":1} with %q", in, got, rungs, err, want)
		}
	}
	// JSON encoded twice, a string holding a string holding the object,
	// and three times, one level more, have that one reading; a fourth
	// level is not unwrapped.
	if got, rungs, err := Repair(`"\"{\\\"a\\\":1}\""`, RepairOptions{}); err != nil || string(got) != `{"a":1}` || !slices.Equal(rungs, r(RungDoubleEncoded)) {
		t.Errorf("encoded twice: %s, %q, %v", got, rungs, err)
	}
	three := `"\"\\\"{\\\\\\\"a\\\\\\\":1}\\\"\""`
	if got, rungs, err := Repair(three, RepairOptions{}); err != nil || string(got) != `{"a":1}` || !slices.Equal(rungs, r(RungDoubleEncoded)) {
		t.Errorf("encoded three times: %s, %q, %v", got, rungs, err)
	}
	four, _ := json.Marshal(three)
	if got, _, err := Repair(string(four), RepairOptions{}); err == nil && string(got) == `{"a":1}` {
		t.Errorf("encoded four times, unwrapped")
	}
}
