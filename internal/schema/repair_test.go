package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// repairCase is one entry of the repair corpus. It doubles as the fuzz seed
// corpus (see FuzzRepair).
type repairCase struct {
	name  string
	in    string
	want  string   // JSON whose decoded value the repaired output must equal
	rungs []string // expected rungs, nil when the input parses as sent
}

var (
	fences = []string{RungStripFences}
	closed = []string{RungCloseTruncated}
	fixed  = []string{RungJSONRepair}
)

var repairCorpus = []repairCase{
	// Rung 1: as sent.
	{"valid", `{"path":"/tmp/x","n":1}`, `{"path":"/tmp/x","n":1}`, nil},
	{"valid with surrounding whitespace", " \n\t{\"a\":[1,2]}\r\n", `{"a":[1,2]}`, nil},
	{"valid non-object is left to the schema", `[1,2]`, `[1,2]`, nil},
	{"empty", ``, `{}`, nil},
	{"blank", " \n\t\r ", `{}`, nil},

	// Rung 2: strip_fences.
	{"fenced json", "```json\n{\"query\":\"golang\"}\n```", `{"query":"golang"}`, fences},
	{"fenced without language", "```\n{\"a\":{\"b\":true}}\n```", `{"a":{"b":true}}`, fences},
	{"indented fence", "  ```json\n  {\"a\":1}\n  ```", `{"a":1}`, fences},
	{"prose before and after", "Sure! Here are the arguments: {\"q\":\"go\",\"limit\":5} Let me know if you need more.", `{"q":"go","limit":5}`, fences},
	{"prose with braces in strings", `Calling: {"a":"}{ ` + "```" + ` \"}"} done`, `{"a":"}{ ` + "```" + ` \"}"}`, fences},
	{"unterminated fence", "```json\n{\"a\":1}", `{"a":1}`, fences},
	{"prose with braces before a fence", "Call {tool} with:\n```json\n{\"a\":1}\n```\nThanks.", `{"a":1}`, fences},
	{"stray closing fence", "{\"a\":\"b\"}\n```", `{"a":"b"}`, fences},

	// Rung 2 then 3: fenced and truncated.
	{"unterminated fence, truncated", "```json\n{\"a\":\"hel", `{"a":"hel"}`, []string{RungStripFences, RungCloseTruncated}},
	{"fence closes a truncated object", "```json\n{\"a\":[1,2\n```", `{"a":[1,2]}`, []string{RungStripFences, RungCloseTruncated}},
	{"fence cuts a truncated string", "```json\n{\"a\":\"hel\n```", `{"a":"hel"}`, []string{RungStripFences, RungCloseTruncated}},

	// Rung 3: close_truncated.
	{"truncated string", `{"path":"/tmp/fo`, `{"path":"/tmp/fo"}`, closed},
	{"truncated after value", `{"a":1`, `{"a":1}`, closed},
	{"only an opening brace", `{`, `{}`, closed},
	{"truncated first key", `{"pa`, `{}`, closed},
	{"truncated mid-key", `{"a":1,"pa`, `{"a":1}`, closed},
	{"truncated after key", `{"a":1,"b"`, `{"a":1}`, closed},
	{"truncated after colon", `{"a":1,"b":`, `{"a":1}`, closed},
	{"truncated after colon and space", `{"a":1, "b": `, `{"a":1}`, closed},
	{"truncated after comma", `{"a":1,`, `{"a":1}`, closed},
	{"truncated in nested containers", `{"a":{"b":[1,{"c":"d`, `{"a":{"b":[1,{"c":"d"}]}}`, closed},
	{"truncated after comma in array", `{"a":[1,2,`, `{"a":[1,2]}`, closed},
	{"truncated after colon in nested object", `{"a":{"b":`, `{"a":{}}`, closed},
	{"truncated pretty-printed", "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": \"x", `{"a":[1,2],"b":"x"}`, closed},
	{"truncated mid-escape", `{"a":"x\`, `{"a":"x"}`, closed},
	{"truncated after escaped quote", `{"a":"say \"hi\"`, `{"a":"say \"hi\""}`, closed},
	{"truncated after escaped backslash", `{"a":"C:\\`, `{"a":"C:\\"}`, closed},
	{"truncated mid-unicode escape", `{"a":"caf\u00`, `{"a":"caf"}`, closed},
	{"truncated after high surrogate", `{"a":"smile \ud83d`, `{"a":"smile "}`, closed},
	{"truncated in low surrogate", `{"a":"smile \ud83d\ude`, `{"a":"smile "}`, closed},
	{"complete surrogate pair kept", `{"a":"smile \ud83d\ude00`, `{"a":"smile 😀"}`, closed},
	{"truncated mid-UTF-8", "{\"a\":\"caf\xc3", `{"a":"caf"}`, closed},
	{"truncated mid-true", `{"a":tr`, `{"a":true}`, closed},
	{"truncated mid-false", `{"a":fals`, `{"a":false}`, closed},
	{"truncated mid-null in array", `{"a":[nu`, `{"a":[null]}`, closed},
	{"truncated after t", `{"a":t`, `{"a":true}`, closed},
	{"truncated number", `{"a":12`, `{"a":12}`, closed},
	{"truncated after minus", `{"a":1,"b":-`, `{"a":1}`, closed},
	{"truncated after dot", `{"a":1.`, `{"a":1}`, closed},
	{"truncated after exponent", `{"a":1e`, `{"a":1}`, closed},
	{"truncated after exponent sign", `{"a":1.5e+`, `{"a":1.5}`, closed},
	{"truncated minus in array", `{"a":[1,-`, `{"a":[1]}`, closed},
	{"extra closer", `{"a":1}}`, `{"a":1}`, closed},
	{"extra closers of both kinds", `{"a":1}]}`, `{"a":1}`, closed},
	{"extra closer inside", `{"a":[1,2]],"b":3}`, `{"a":[1,2],"b":3}`, closed},
	{"mismatched closer", `{"a":[1,2}`, `{"a":[1,2]}`, closed},
	{"mismatched closer inside", `{"a":[{"b":1],"c":2}`, `{"a":[{"b":1}],"c":2}`, closed},
	{"closer with nothing to close", `{"a":{"b":1]}`, `{"a":{"b":1}}`, closed},
	{"braces inside strings", `{"a":"{[}]\"","b":"x`, `{"a":"{[}]\"","b":"x"}`, closed},
	{"truncated top-level string", `"abc`, `"abc"`, closed},

	// Rung 4: json_repair.
	{"trailing comma", `{"a":1,}`, `{"a":1}`, fixed},
	{"trailing commas nested", `{"a":[1,2,],"b":{"c":3,},}`, `{"a":[1,2],"b":{"c":3}}`, fixed},
	{"single quotes", `{'a': 'b', 'c': ['d']}`, `{"a":"b","c":["d"]}`, fixed},
	{"line comment", "{\n  // the path\n  \"a\": 1\n}", `{"a":1}`, fixed},
	{"block comment", `{"a": 1 /* one */, "b": 2}`, `{"a":1,"b":2}`, fixed},
	{"unquoted keys", `{a: 1, b: "x"}`, `{"a":1,"b":"x"}`, fixed},
	{"python literals", `{"a": True, "b": False, "c": None}`, `{"a":true,"b":false,"c":null}`, fixed},
	{"missing comma", `{"a":1 "b":2}`, `{"a":1,"b":2}`, fixed},
	{"trailing comma and truncation", `{"a":[1,],"b":"x`, `{"a":[1],"b":"x"}`, fixed},
	{"fenced single quotes", "```json\n{'a': 1}\n```", `{"a":1}`, []string{RungStripFences, RungJSONRepair}},
}

func decode(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return v
}

func TestRepairCorpus(t *testing.T) {
	for _, tc := range repairCorpus {
		t.Run(tc.name, func(t *testing.T) {
			got, rungs, err := Repair(tc.in, RepairOptions{})
			if err != nil {
				t.Fatalf("Repair(%q): %v", tc.in, err)
			}
			if !json.Valid(got) {
				t.Fatalf("Repair(%q) = %q, not valid JSON", tc.in, got)
			}
			if g, w := decode(t, got), decode(t, []byte(tc.want)); !reflect.DeepEqual(g, w) {
				t.Errorf("Repair(%q) = %s, want %s", tc.in, got, tc.want)
			}
			if !slices.Equal(rungs, tc.rungs) {
				t.Errorf("Repair(%q) rungs = %q, want %q", tc.in, rungs, tc.rungs)
			}
		})
	}
}

func TestRepairFailures(t *testing.T) {
	for _, in := range []string{
		"I cannot call this tool.", // the library would quote prose into a string
		"-",
		"}}",
		"[1,2] and more",
		strings.Repeat("[", maxNesting+1),
	} {
		_, _, err := Repair(in, RepairOptions{})
		if !errors.Is(err, ErrUnparseable) {
			t.Errorf("Repair(%.40q) error = %v, want ErrUnparseable", in, err)
		}
	}
}

// TestRepairErrorNamesOffset checks that the error gives a model what it
// needs to fix its arguments: encoding/json's message and byte offset for
// the text as sent.
func TestRepairErrorNamesOffset(t *testing.T) {
	in := `  {"command": rm -rf /tmp/x}`
	var se *json.SyntaxError
	if !errors.As(json.Unmarshal([]byte(in), new(any)), &se) {
		t.Fatal("test input unexpectedly valid")
	}
	_, _, err := Repair(in, RepairOptions{Conservative: true})
	if !errors.Is(err, ErrUnparseable) {
		t.Fatalf("err = %v, want ErrUnparseable", err)
	}
	for _, want := range []string{se.Error(), fmt.Sprintf("byte offset %d", se.Offset), `near "`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
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

// TestRepairEveryTruncation cuts realistic arguments at every byte offset.
// Every cut after the opening brace must repair with close_truncated alone,
// keep every member it did not cut into, and invent no keys; in
// conservative mode every cut must be refused.
func TestRepairEveryTruncation(t *testing.T) {
	var docs []string
	for _, s := range realisticArgs {
		docs = append(docs, s, indented(t, s))
	}
	for d, doc := range docs {
		var orig map[string]any
		if err := json.Unmarshal([]byte(doc), &orig); err != nil {
			t.Fatalf("doc %d: %v", d, err)
		}
		ok := 0
		for k := 1; k < len(doc); k++ {
			in := doc[:k]
			got, rungs, err := Repair(in, RepairOptions{})
			if err != nil {
				t.Errorf("doc %d cut at %d (%q): %v", d, k, tail(in), err)
				continue
			}
			if !json.Valid(got) {
				t.Fatalf("doc %d cut at %d: invalid output %q", d, k, got)
			}
			if !slices.Equal(rungs, closed) {
				t.Errorf("doc %d cut at %d (%q): rungs %q, want %q", d, k, tail(in), rungs, closed)
			}
			var m map[string]any
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatalf("doc %d cut at %d: output %q is not an object: %v", d, k, got, err)
			}
			// Only the member the cut fell into may differ from the original.
			changed := 0
			for key, v := range m {
				ov, found := orig[key]
				if !found {
					t.Errorf("doc %d cut at %d: invented key %q in %s", d, k, key, got)
				}
				if !reflect.DeepEqual(v, ov) {
					changed++
				}
			}
			if changed > 1 {
				t.Errorf("doc %d cut at %d: %d members differ from the original: %s", d, k, changed, got)
			}
			ok++

			if _, _, err := Repair(in, RepairOptions{Conservative: true}); !errors.Is(err, ErrUnparseable) {
				t.Errorf("doc %d cut at %d: conservative error = %v, want ErrUnparseable", d, k, err)
			}
		}
		if want := len(doc) - 1; ok != want {
			t.Errorf("doc %d: %d of %d truncations repaired", d, ok, want)
		}
	}
}

func tail(s string) string {
	if len(s) > 24 {
		return "…" + s[len(s)-24:]
	}
	return s
}

func TestRepairConservative(t *testing.T) {
	opt := RepairOptions{Conservative: true}

	_, _, err := Repair(`{"command":"rm -rf /tmp/x`, opt)
	if !errors.Is(err, ErrUnparseable) {
		t.Errorf("truncated rm: err = %v, want ErrUnparseable", err)
	}

	got, rungs, err := Repair("```json\n{\"command\":\"ls\"}\n```", opt)
	if err != nil || string(got) != `{"command":"ls"}` || !slices.Equal(rungs, fences) {
		t.Errorf("fenced: got %q, %q, %v; want the object via strip_fences", got, rungs, err)
	}

	got, rungs, err = Repair(`{"command":"ls"}`, opt)
	if err != nil || string(got) != `{"command":"ls"}` || rungs != nil {
		t.Errorf("valid: got %q, %q, %v", got, rungs, err)
	}

	// Nothing conservative mode forbids is ever used, whatever the input.
	for _, tc := range repairCorpus {
		_, rungs, err := Repair(tc.in, opt)
		if slices.Contains(rungs, RungCloseTruncated) || slices.Contains(rungs, RungJSONRepair) {
			t.Errorf("%s: conservative mode used %q", tc.name, rungs)
		}
		if err == nil && slices.ContainsFunc(tc.rungs, func(r string) bool { return r != RungStripFences }) {
			t.Errorf("%s: conservative mode repaired an input that needs %q", tc.name, tc.rungs)
		}
	}
}

func TestRepairSizeLimit(t *testing.T) {
	malformed := `{"a":"` + strings.Repeat("x", 100)
	valid := malformed + `"}`

	_, _, err := Repair(malformed, RepairOptions{Limit: 64})
	if !errors.Is(err, ErrArgumentsTooLarge) || errors.Is(err, ErrUnparseable) {
		t.Errorf("over-limit malformed: err = %v, want only ErrArgumentsTooLarge", err)
	}
	got, rungs, err := Repair(valid, RepairOptions{Limit: 64})
	if err != nil || string(got) != valid || rungs != nil {
		t.Errorf("over-limit valid: got %.20q, %q, %v; want it as sent", got, rungs, err)
	}
	// At the limit exactly, repair still runs.
	if _, rungs, err := Repair(malformed, RepairOptions{Limit: len(malformed)}); err != nil || !slices.Equal(rungs, closed) {
		t.Errorf("at-limit malformed: %q, %v", rungs, err)
	}
	// The zero value means DefaultRepairLimit.
	big := `{"a":"` + strings.Repeat("x", DefaultRepairLimit)
	if _, _, err := Repair(big, RepairOptions{}); !errors.Is(err, ErrArgumentsTooLarge) {
		t.Errorf("default limit: err = %v, want ErrArgumentsTooLarge", err)
	}
}

// TestRepairLargeInputs guards against quadratic behaviour: each of these
// 1 MiB inputs, the worst shapes for the respective rungs, must be handled
// in a small fraction of a second. The bound is loose enough for -race.
func TestRepairLargeInputs(t *testing.T) {
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
		{"truncated many members", repeat(`{`, `"key":"value \"v\" é",`), true},
		{"truncated big string", repeat(`{"content":"`, `line of text\n`), true},
		{"truncated deep nesting", repeat(`{"a":`, `[`), false}, // beyond json's depth limit
		{"single quotes, many members", repeat(`{`, `'k': 'v', `), false},
		{"missing commas", repeat(`{"a":[`, `1 `), false},
		{"unescaped quotes", repeat(`{'a': "`, `x "y" `), false},
		// Strings are only recognized by double quotes when estimating the
		// library's cost, so this one is refused for being too expensive.
		{"single-quoted big string", repeat(`{'a': '`, `abcd `) + `'}`, false},
		{"many fences", repeat(`{`, "\n```"), true},
		{"stray closers", repeat(`{"a":1`, `}]`), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got, _, err := Repair(tc.in, RepairOptions{})
			elapsed := time.Since(start)
			if (err == nil) != tc.ok {
				t.Errorf("err = %v, want success %v", err, tc.ok)
			}
			if err == nil && !json.Valid(got) {
				t.Errorf("invalid output")
			}
			if elapsed > 2*time.Second {
				t.Errorf("took %v", elapsed)
			}
			t.Logf("%v", elapsed)
		})
	}
}

// benchArgs is a ~4 KiB write_file-style argument object.
func benchArgs() string {
	var b strings.Builder
	b.WriteString(`{"path":"src/handlers/user_profile.go","mode":420,"create_dirs":true,"tags":["go","handler",{"owner":"team-α","reviewed":false}],"content":"`)
	line := `\tif err := s.store.Update(ctx, \"users\", id, fields); err != nil {\n\t\treturn fmt.Errorf(\"update user %q: %w\", id, err)\n\t}\n`
	for b.Len() < 4000 {
		b.WriteString(line)
	}
	b.WriteString(`","note":"générée automatiquement ✓"}`)
	return b.String()
}

func BenchmarkRepairTruncated4KiB(b *testing.B) {
	full := benchArgs()
	in := full[:len(full)-30] // cut inside the final note
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Repair(in, RepairOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRepairValid(b *testing.B) {
	in := benchArgs()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Repair(in, RepairOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
