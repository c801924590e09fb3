package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

func main() {
	dir := flag.String("o", "testdata/repair", "output directory")
	flag.Parse()
	g := &gen{rng: rand.New(rand.NewPCG(15, 2026))}
	for _, t := range catalog {
		for i := range 3 {
			g.tool(t, t.args(g.rng, i))
		}
	}
	g.providerSamples()
	g.shapeSamples()
	g.hostileSamples()
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatal(err)
	}
	var tools bytes.Buffer
	enc := json.NewEncoder(&tools)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	schemas := map[string]toolFile{}
	for _, t := range catalog {
		schemas[t.name] = toolFile{Destructive: t.destructive, Schema: json.RawMessage(t.schema)}
	}
	if err := enc.Encode(schemas); err != nil {
		log.Fatal(err)
	}
	write(filepath.Join(*dir, "tools.json"), tools.Bytes())
	var cases bytes.Buffer
	enc = json.NewEncoder(&cases)
	enc.SetEscapeHTML(false)
	for i := range g.cases {
		g.cases[i].ID = i + 1
		if err := enc.Encode(g.cases[i]); err != nil {
			log.Fatal(err)
		}
	}
	write(filepath.Join(*dir, "cases.jsonl"), cases.Bytes())
	fmt.Fprintf(os.Stderr, "corpusgen: %d cases\n", len(g.cases))
}

func write(path string, b []byte) {
	if err := os.WriteFile(path, b, 0o644); err != nil {
		log.Fatal(err)
	}
}

type toolFile struct {
	Destructive bool            `json:"destructive"`
	Schema      json.RawMessage `json:"schema"`
}

// Case is one line of cases.jsonl.
type Case struct {
	ID    int    `json:"id"`
	Class string `json:"class"`
	Tool  string `json:"tool"`
	// Expect is "recover" (the value must be Want exactly) or "refuse"
	// (cut off, or more than one reading).
	Expect string          `json:"expect"`
	Args   string          `json:"args"`
	Want   json.RawMessage `json:"want,omitempty"`
	// Mention, for a refusal, is text its message must hold (the escape
	// and the byte offset it names).
	Mention []string `json:"mention,omitempty"`
	// ArgsBase64 holds Args byte for byte when they are not UTF-8, which
	// a JSON string cannot carry.
	ArgsBase64 string `json:"args_base64,omitempty"`
}

type gen struct {
	rng   *rand.Rand
	cases []Case
	seen  map[string]bool
}

func (g *gen) add(class, tool, expect, args, want string) {
	if g.seen == nil {
		g.seen = map[string]bool{}
	}
	if g.seen[tool+"\x00"+args] {
		return
	}
	g.seen[tool+"\x00"+args] = true
	c := Case{Class: class, Tool: tool, Expect: expect, Args: args}
	if expect == "recover" {
		c.Want = json.RawMessage(want)
	}
	if !utf8.ValidString(args) {
		c.ArgsBase64 = base64.StdEncoding.EncodeToString([]byte(args))
	}
	g.cases = append(g.cases, c)
}

func (g *gen) pick(xs ...string) string { return xs[g.rng.IntN(len(xs))] }

// tool adds every class for one argument object.
func (g *gen) tool(t toolDef, v obj) {
	want := print(v, style{})
	name := t.name
	pretty := print(v, style{indent: true})
	base := []string{want, pretty}
	rec := func(class, args string) { g.add(class, name, "recover", args, want) }
	ref := func(class, args string) { g.add(class, name, "refuse", args, "") }

	rec("valid", want)
	for _, b := range base {
		rec("fences", g.pick("```json\n", "```\n", "```JSON\n", "  ```json\n")+b+"\n```")
		rec("prose", g.pick(prose...)+b)
		rec("prose", b+g.pick(afterProse...))
		rec("prose", g.pick(prose...)+"\n```json\n"+b+"\n```\n"+g.pick(afterProse...))
		rec("bom_whitespace", "\uFEFF"+b)
		rec("bom_whitespace", "\n\n  "+b+"\n\t ")
		rec("template_tokens", b+g.pick("<|call|>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "\n<|end|>"))
		rec("template_tokens", "<|channel|>commentary to=functions."+name+" <|constrain|>json<|message|>"+b+"<|call|>")
		rec("tool_call_tags", g.pick("<tool_call>", "<tool_call>\n", "<function_call>")+b+g.pick("</tool_call>", "\n</tool_call>", "</function_call>"))
		rec("extra_closer", b+g.pick("}", "\n}", "}}", "]"))
		rec("wrapping_braces", g.pick("{", "{ ", "{\n")+b+g.pick("}", " }", "\n}"))
	}
	rec("double_encoded", jsonString(want))
	rec("double_encoded", jsonString(pretty))
	rec("double_encoded", jsonString(want)+g.pick("<|call|>", "\n", "\n<|endoftext|>"))

	// Printing styles: each a class of its own when it changed the text.
	styles := []struct {
		class string
		s     style
	}{
		{"trailing_commas", style{trailing: true}},
		{"trailing_commas", style{indent: true, trailing: true}},
		{"comments", style{indent: true, comments: true}},
		{"comments", style{comments: true}},
		{"unquoted_keys", style{unquoted: true}},
		{"unquoted_keys", style{indent: true, unquoted: true}},
		{"single_quotes", style{single: true}},
		{"single_quotes", style{indent: true, single: true}},
		{"python_literals", style{python: true}},
		{"python_dict", style{single: true, python: true, spaced: true}},
		{"missing_commas", style{missingComma: true}},
		{"missing_commas", style{indent: true, missingComma: true}},
		{"control_chars", style{rawControl: true}},
		{"control_chars", style{indent: true, rawControl: true}},
		{"invalid_escapes", style{rawBackslash: true}},
		{"invalid_escapes", style{indent: true, rawBackslash: true}},
		{"unicode_spaces", style{uspace: true}},
		{"unicode_spaces", style{indent: true, uspace: true}},
		{"json5", style{indent: true, unquoted: true, single: true, trailing: true, comments: true}},
		{"mixed", style{indent: true, missingComma: true, rawControl: true, trailing: true}},
		{"mixed", style{rawBackslash: true, rawControl: true, python: true}},
	}
	for _, st := range styles {
		st.s.rng = g.rng
		text := print(v, st.s)
		if text == want || text == pretty {
			continue
		}
		rec(st.class, text)
		// Combined with packaging.
		switch g.rng.IntN(4) {
		case 0:
			rec(st.class+"+fences", "```json\n"+text+"\n```")
		case 1:
			rec(st.class+"+prose", g.pick(prose...)+text+g.pick(afterProse...))
		case 2:
			rec(st.class+"+double_encoded", jsonString(text))
		case 3:
			rec(st.class+"+wrapping_braces", "{"+text+"}")
		}
	}

	// Ambiguous: refused.
	if text := print(v, style{naiveSingle: true, rng: g.rng}); text != print(v, style{single: true, rng: g.rng}) {
		ref("ambiguous_apostrophe", text)
	}
	if text := print(v, style{squoteEscape: true, rng: g.rng}); text != want {
		ref("ambiguous_escape", text)
	}
	ref("two_objects", want+g.pick(" ", "\n", "\n\n")+print(t.args(g.rng, 9), style{}))
	ref("two_objects", "```json\n"+want+"\n```\n```json\n"+print(t.args(g.rng, 10), style{})+"\n```")

	// Cut off at every kind of position, bare and packaged.
	for _, b := range base {
		cuts := cutPositions(b)
		kinds := make([]string, 0, len(cuts))
		for kind := range cuts {
			kinds = append(kinds, kind)
		}
		sort.Strings(kinds) // map order would make the output differ per run
		for _, kind := range kinds {
			ks := cuts[kind]
			g.rng.Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
			for _, k := range ks[:1] {
				cut := b[:k]
				ref("cut_"+kind, cut)
				switch g.rng.IntN(4) {
				case 0:
					ref("cut_"+kind+"+fences", "```json\n"+cut+"\n```")
				case 1:
					ref("cut_"+kind+"+tokens", cut+"<|call|>")
				case 2:
					ref("cut_"+kind+"+prose", g.pick(prose...)+cut)
				}
			}
		}
	}
	// Cut in the other styles, anywhere after the opening brace.
	for _, s := range []style{{single: true, python: true}, {trailing: true, indent: true}, {rawControl: true}, {unquoted: true, comments: true, indent: true}} {
		s.rng = g.rng
		text := print(v, s)
		for range 2 {
			ref("cut_styled", text[:1+g.rng.IntN(len(text)-1)])
		}
	}
	ref("cut_double_encoded", jsonString(want[:1+g.rng.IntN(len(want)-1)]))
}

var prose = []string{
	"Sure! Here are the arguments: ",
	"Here is the call:\n",
	"I'll run this now.\n\n",
	"Calling the tool with the following parameters (as JSON):\n",
	"Okay — let's do it. ",
	"Arguments:\n",
	"To do that, I'll use the tool like so: ",
}

var afterProse = []string{
	"\n\nLet me know if you need anything else.",
	" I've kept the defaults for everything else.",
	"\nThis should work.",
	"\n\n(Note: I can't verify the result until it runs.)",
	"\n\nI'll fill in the {placeholder} values afterwards.",
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// providerSamples are shapes reported from real providers and agents.
func (g *gen) providerSamples() {
	add := func(class, tool, args, want string) { g.add("provider_"+class, tool, "recover", args, want) }
	add("double_encoded", "run_command", `"{\"command\": \"ls -la /var/log\", \"timeout_seconds\": 30}"`, `{"command":"ls -la /var/log","timeout_seconds":30}`)
	add("harmony", "web_search", `<|start|>assistant<|channel|>commentary to=functions.web_search <|constrain|>json<|message|>{"query":"nats jetstream ack wait","limit":5}<|call|>`, `{"query":"nats jetstream ack wait","limit":5}`)
	add("hermes", "read_file", "<tool_call>\n{\"path\": \"src/main.go\", \"offset\": 0, \"limit\": 200}\n</tool_call>", `{"path":"src/main.go","offset":0,"limit":200}`)
	add("python_repr", "github_create_issue", `{'owner': 'agentbull', 'repo': 'toolruntime', 'title': 'Worker crashes on "quoted" input', 'body': 'Steps:\n1. send it\n2. watch', 'labels': ['bug'], 'milestone': None}`,
		`{"owner":"agentbull","repo":"toolruntime","title":"Worker crashes on \"quoted\" input","body":"Steps:\n1. send it\n2. watch","labels":["bug"],"milestone":null}`)
	add("retry_braces", "slack_post_message", `{{"channel": "#ops", "text": "Deploy finished ✅"}}`, `{"channel":"#ops","text":"Deploy finished ✅"}`)
	add("issue_html", "write_file", `{"path": "index.html", "content": "<div class=\"a\">…</div>",}`, `{"path":"index.html","content":"<div class=\"a\">…</div>"}`)
	add("issue_message", "slack_post_message", `{"text": "Line one\nLine two\tTabbed" "channel": "#ops"}`, `{"text":"Line one\nLine two\tTabbed","channel":"#ops"}`)
	add("issue_regex", "search_code", `{"pattern": "^\d{3}-\d{4}$", "path": "."}`, `{"pattern":"^\\d{3}-\\d{4}$","path":"."}`)
	add("raw_newlines", "write_file", "{\"path\": \"notes.md\", \"content\": \"# Notes\n\n- one\n- two\n\"}", `{"path":"notes.md","content":"# Notes\n\n- one\n- two\n"}`)
	add("shell_continuation", "run_command", "{\"command\": \"docker run \\\n  --rm alpine echo hi\"}", `{"command":"docker run \\\n  --rm alpine echo hi"}`)
	add("markdown_fence", "run_command", "```json\n{\n  \"command\": \"go test ./...\",\n  \"timeout_seconds\": 600\n}\n```", `{"command":"go test ./...","timeout_seconds":600}`)
	add("trailing_token", "web_fetch", `{"url": "https://example.com/a?b=1&c=2", "max_bytes": 200000}<|endoftext|>`, `{"url":"https://example.com/a?b=1&c=2","max_bytes":200000}`)
}

// shapeSamples are the argument shapes of issue 22 and issue 24 (written
// by hand; checked against nst/JSONTestSuite, whose files are not copied):
// strings that hold no text, escapes with two readings, numbers as
// written, a value after the object, and the lossless recoveries.
func (g *gen) shapeSamples() {
	ok := func(class, tool, args, want string) { g.add("shapes_"+class, tool, "recover", args, want) }
	no := func(class, tool, args string, mention ...string) {
		g.add("shapes_"+class, tool, "refuse", args, "")
		g.cases[len(g.cases)-1].Mention = mention
	}
	// Lone surrogates and bytes that are not UTF-8: refused, never U+FFFD.
	no("surrogate", "write_file", `{"path": "\ud800.txt", "content": "x"}`, `\ud800`, "byte 10")
	no("surrogate", "write_file", `{"path": "a\udc00", "content": "x"}`, `\udc00`, "byte 11")
	no("surrogate", "write_file", `{"path": "a\ud83d\u0041", "content": "x"}`, `\ud83d`, "byte 11")
	no("surrogate", "write_file", `{"path": "a\ude80\ud83d", "content": "x"}`, `\ude80`, "byte 11")
	no("surrogate", "slack_post_message", `{'channel': '#ops', 'text': '\ud800'}`, `\ud800`)
	no("surrogate", "run_command", `"{\"command\": \"echo \\ud800\"}"`, `\ud800`)
	no("surrogate", "web_search", `{"query": "x", "sites": ["\uDBFF"]}`, `\uDBFF`)
	no("surrogate", "write_file", "{\"path\": \"a.txt\", \"content\": \"\xff\xfe\"}", "0xff", "byte 30")
	no("surrogate", "write_file", "{\"path\": \"caf\xe9.txt\", \"content\": \"x\"}", "0xe9", "byte 13")
	no("surrogate", "write_file", "{\"path\": \"\xed\xa0\x80\", \"content\": \"x\"}", "0xed")
	no("surrogate", "write_file", "{\"path\": \"\xc0\xaf\", \"content\": \"x\"}", "0xc0")
	ok("surrogate", "slack_post_message", "{\"channel\": \"#a\", \"text\": \"hi\",} \xff", `{"channel":"#a","text":"hi"}`)
	ok("surrogate", "write_file", `{"path": "\ud83d\ude80.txt", "content": "\uFFFD"}`, `{"path":"🚀.txt","content":"\ufffd"}`)
	ok("surrogate", "write_file", `{"path": "\ud83d\ude80.txt", "content": "x",}`, `{"path":"🚀.txt","content":"x"}`)

	// Escapes JSON lacks that other languages read as a character.
	for _, e := range []struct{ esc, off string }{
		{`\x1b`, "byte 30"}, {`\xe9`, "byte 30"}, {`\U0001F680`, "byte 30"}, {`\0`, "byte 30"},
		{`\7`, "byte 30"}, {`\012`, "byte 30"}, {`\v`, "byte 30"}, {`\a`, "byte 30"}, {`\e`, "byte 30"},
		{`\u{1F680}`, "byte 30"}, {`\N{BULLET}`, "byte 30"},
	} {
		no("escapes", "write_file", `{"path": "a.txt", "content": "`+e.esc+`[0m"}`, e.off, `\`+e.esc[:2])
	}
	no("escapes", "run_command", `{"command": "printf '\x1b[31mred'"}`, `\\x1b`, `\u001b`)
	no("escapes", "run_command", `{"command": "echo \0"}`, `\\0`)
	ok("escapes", "run_command", `{"command": "ls",} // \a`, `{"command":"ls"}`)
	ok("escapes", "search_code", `{"pattern": "\d+\s\w\.", "path": "."}`, `{"pattern":"\\d+\\s\\w\\.","path":"."}`)
	ok("escapes", "write_file", `{"path": "C:\Users\me\x.txt", "content": "\xyz"}`, `{"path":"C:\\Users\\me\\x.txt","content":"\\xyz"}`)
	ok("escapes", "write_file", `{'path': 'a.txt', 'content': '\x1b[0m \xe9 \u00e9 \U0001F680'}`, `{"path":"a.txt","content":"\u001b[0m é é 🚀"}`)
	ok("escapes", "slack_post_message", `{'channel': '#a', 'text': 'tab\there \x41'}`, `{"channel":"#a","text":"tab\there A"}`)
	no("escapes", "slack_post_message", `{'channel': '#a', 'text': '\x4'}`, `\x4`)
	no("escapes", "slack_post_message", `{'channel': '#a', 'text': '\U0011FFFF'}`, `\U0011FFFF`)

	// Incomplete \u escapes.
	no("incomplete_u", "write_file", `{"path": "\u00A", "content": "x"}`, `\u00A`, "byte 10")
	no("incomplete_u", "write_file", `{"path": "\uD834\uDd", "content": "x"}`, `\uDd`, "byte 16")
	no("incomplete_u", "read_file", `{"path": "\u1"}`, `\u1`)
	no("incomplete_u", "read_file", `{"path": "\u12 x", "limit": 3}`, `\u12`)

	// Numbers as written.
	ok("numbers", "submit_result", `{"result": {"zero": -0.0, "hundreds": 2e2, "big": 1E+2, "frac": 2.50, "neg": -0}}`,
		`{"result":{"zero":-0.0,"hundreds":2e2,"big":1E+2,"frac":2.50,"neg":-0}}`)
	ok("numbers", "create_schedule", `{"name": "n", "cron": "* * * * *", "prompt": "p", "jitter_seconds": -0.0,}`,
		`{"name":"n","cron":"* * * * *","prompt":"p","jitter_seconds":-0.0}`)
	ok("numbers", "read_file", `{"path": "a", "offset": 1e1, "limit": 2.0E1}`, `{"path":"a","offset":1e1,"limit":2.0E1}`)
	ok("numbers", "sql_execute", `{'sql': 'select ?', 'params': [-0.0, 1e-7, 123456789012345678901234567890]}`,
		`{"sql":"select ?","params":[-0.0,1e-7,123456789012345678901234567890]}`)

	// A value after (or before) the object is not prose.
	no("trailing_value", "edit_file", `{"path": "a", "old_text": "x", "new_text": "y"} "x"`, "byte 48")
	no("trailing_value", "run_command", `{"command": "ls"} 42`, "byte 18")
	no("trailing_value", "run_command", `{"command": "ls"} ["rm -rf /"]`, "byte 18")
	no("trailing_value", "run_command", `{"command": "ls"} true`)
	no("trailing_value", "run_command", `{"command": "ls"}`+"\n\"rm\"")
	no("trailing_value", "run_command", `"x" {"command": "ls"}`)
	no("trailing_value", "run_command", `42 {"command": "ls"}`)
	no("trailing_value", "run_command", `{'command': 'ls'} 'rm'`)
	no("trailing_value", "run_command", `Not "{\"command\": \"rm\"}" but {"command": "ls"}`, "more than one")
	ok("trailing_value", "run_command", `{"command": "ls"} 'cause it's short`, `{"command":"ls"}`)
	ok("trailing_value", "run_command", `{"command": "ls"} [TOOL_CALLS]`, `{"command":"ls"}`)
	ok("trailing_value", "run_command", `{"command": "ls"} - done.`, `{"command":"ls"}`)

	// Lossless recoveries with one reading.
	ok("fence_attributes", "write_file", "```json title=\"args.json\"\n{\"path\": \"a.txt\", \"content\": \"x\"}\n```", `{"path":"a.txt","content":"x"}`)
	ok("fence_attributes", "run_command", "```json {.args}\n{\"command\": \"ls\"}\n```\n", `{"command":"ls"}`)
	ok("fence_attributes", "run_command", "```json title=\"a.json\"\n\"{\\\"command\\\": \\\"ls\\\"}\"\n```", `{"command":"ls"}`)
	ok("encoded_twice", "run_command", `"\"{\\\"command\\\": \\\"ls -la\\\"}\""`, `{"command":"ls -la"}`)
	ok("encoded_twice", "write_file", `"\"{\\\"path\\\": \\\"a\\\", \\\"content\\\": \\\"b\\\"}\""`, `{"path":"a","content":"b"}`)
	ok("prose_double_encoded", "run_command", `Here are the arguments: "{\"command\": \"ls\"}"`, `{"command":"ls"}`)
	ok("prose_double_encoded", "write_file", `I'll write it now. "{\"path\": \"a\", \"content\": \"b\"}"`, `{"path":"a","content":"b"}`)
	no("prose_double_encoded", "run_command", `Here: "{\"command\": \"ls\"}" or "{\"command\": \"rm\"}"`)

	// Over-deep arguments (issue 24): refused, with a bounded message.
	deep := strings.Repeat(`{"a":`, 600) + "1" + strings.Repeat("}", 600)
	no("deep", "submit_result", `{"result": `+deep+`}`, "512")
	no("deep", "submit_result", `{"result": `+strings.Repeat("[", 10001)+strings.Repeat("]", 10001)+`}`, "512")
	no("deep", "sql_execute", `{"sql": "x", "params": `+strings.Repeat("[", 513)+strings.Repeat("]", 513)+`}`, "512")
	ok("deep", "sql_execute", `{"sql": "x", "params": `+strings.Repeat("[", 511)+strings.Repeat("]", 511)+`}`,
		`{"sql":"x","params":`+strings.Repeat("[", 511)+strings.Repeat("]", 511)+`}`)
}

// ---------------------------------------------------------------------------
// Values and their printing.

type kv struct {
	k string
	v any
}

type obj []kv

type num string

// charEscapes are the letters after a backslash that JSON or a common
// language reads as a character: a raw backslash before any of them is
// refused (or is an escape), so the generator never writes one there.
const charEscapes = `"\/bfnrtu'xUaev01234567N`

type style struct {
	rng          *rand.Rand
	indent       bool
	spaced       bool // ", " and ": " as Python prints
	unquoted     bool
	single       bool // Python repr quoting: single quotes unless an apostrophe is inside
	naiveSingle  bool // single quotes even around an apostrophe
	squoteEscape bool // \' for an apostrophe between double quotes
	python       bool
	trailing     bool
	comments     bool
	missingComma bool
	rawControl   bool
	rawBackslash bool
	uspace       bool // a no-break or zero-width space after some colons
}

var ident = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

var commentText = []string{"the path is relative", "don't change this", "TODO: check {x}", "default is 30", "see \"docs\""}

func print(v any, s style) string {
	var b strings.Builder
	p := printer{s: s, b: &b}
	p.value(v, 0)
	return b.String()
}

type printer struct {
	s style
	b *strings.Builder
}

func (p *printer) coin() bool { return p.s.rng == nil || p.s.rng.IntN(2) == 0 }

func (p *printer) nl(depth int) {
	if p.s.indent {
		p.b.WriteString("\n" + strings.Repeat("  ", depth))
	}
}

func (p *printer) value(v any, depth int) {
	switch v := v.(type) {
	case obj:
		p.b.WriteByte('{')
		for i, m := range v {
			if p.s.comments && p.s.indent && p.s.rng != nil && p.s.rng.IntN(3) == 0 {
				p.nl(depth + 1)
				p.b.WriteString("// " + commentText[p.s.rng.IntN(len(commentText))])
			}
			p.nl(depth + 1)
			p.key(m.k)
			p.b.WriteByte(':')
			if p.s.uspace && p.coin() {
				p.b.WriteString(string([]rune{'\u00a0', '\u200b', '\u3000'}[len(p.b.String())%3]))
			} else if p.s.indent || p.s.spaced {
				p.b.WriteByte(' ')
			}
			p.value(m.v, depth+1)
			if i < len(v)-1 {
				if p.s.missingComma && p.coin() {
					if !p.s.indent {
						p.b.WriteByte(' ')
					}
				} else {
					p.b.WriteByte(',')
					if p.s.spaced && !p.s.indent {
						p.b.WriteByte(' ')
					}
				}
				if p.s.comments && !p.s.indent && p.s.rng != nil && p.s.rng.IntN(3) == 0 {
					p.b.WriteString(" /* " + commentText[p.s.rng.IntN(len(commentText))] + " */ ")
				}
			} else if p.s.trailing && p.coin() {
				p.b.WriteByte(',')
			}
		}
		if len(v) > 0 {
			p.nl(depth)
		}
		p.b.WriteByte('}')
	case []any:
		p.b.WriteByte('[')
		for i, e := range v {
			p.nl(depth + 1)
			p.value(e, depth+1)
			if i < len(v)-1 {
				p.b.WriteByte(',')
				if p.s.spaced && !p.s.indent {
					p.b.WriteByte(' ')
				}
			} else if p.s.trailing && p.coin() {
				p.b.WriteByte(',')
			}
		}
		if len(v) > 0 {
			p.nl(depth)
		}
		p.b.WriteByte(']')
	case string:
		p.str(v)
	case num:
		p.b.WriteString(string(v))
	case bool:
		switch {
		case p.s.python && v:
			p.b.WriteString("True")
		case p.s.python:
			p.b.WriteString("False")
		case v:
			p.b.WriteString("true")
		default:
			p.b.WriteString("false")
		}
	case nil:
		if p.s.python {
			p.b.WriteString("None")
		} else {
			p.b.WriteString("null")
		}
	default:
		panic(fmt.Sprintf("value %T", v))
	}
}

func (p *printer) key(k string) {
	if p.s.unquoted && ident.MatchString(k) {
		p.b.WriteString(k)
		return
	}
	p.str(k)
}

func (p *printer) str(s string) {
	q := byte('"')
	if p.s.naiveSingle || (p.s.single && !strings.Contains(s, "'")) {
		q = '\''
	}
	p.b.WriteByte(q)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q && q == '\'' && p.s.naiveSingle:
			p.b.WriteByte(c) // the ambiguity under test
		case c == q:
			p.b.WriteString(`\` + string(c))
		case c == '\'' && p.s.squoteEscape:
			p.b.WriteString(`\'`)
		case c == '\\':
			next := byte(0)
			if i+1 < len(s) {
				next = s[i+1]
			}
			if p.s.rawBackslash && next >= 0x20 && !strings.ContainsRune(charEscapes, rune(next)) {
				p.b.WriteByte('\\')
			} else {
				p.b.WriteString(`\\`)
			}
		case (c == '\n' || c == '\t') && p.s.rawControl:
			p.b.WriteByte(c)
		case c < 0x20:
			switch c {
			case '\n':
				p.b.WriteString(`\n`)
			case '\t':
				p.b.WriteString(`\t`)
			case '\r':
				p.b.WriteString(`\r`)
			default:
				fmt.Fprintf(p.b, `\u%04x`, c)
			}
		default:
			p.b.WriteByte(c)
		}
	}
	p.b.WriteByte(q)
}

// ---------------------------------------------------------------------------
// Cut positions.

// cutPositions classifies every proper prefix length of a valid JSON text
// by where the cut falls.
func cutPositions(s string) map[string][]int {
	out := map[string][]int{}
	type frame struct{ obj, key bool } // key: the next string in this object is a key
	var stack []frame
	inStr, esc, isKey := false, false, false
	state := "" // between tokens: after_open, after_colon, after_comma, after_value
	add := func(kind string, k int) { out[kind] = append(out[kind], k) }
	for k := 1; k < len(s); k++ {
		c := s[k-1] // the last byte kept
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if isKey {
					state = "after_key"
				} else {
					state = "after_value"
				}
			}
		case c == '"':
			inStr = true
			isKey = len(stack) > 0 && stack[len(stack)-1].obj && (state == "after_open" || state == "after_comma")
		case c == '{' || c == '[':
			stack = append(stack, frame{obj: c == '{'})
			state = "after_open"
		case c == '}' || c == ']':
			stack = stack[:len(stack)-1]
			state = "after_value"
		case c == ':':
			state = "after_colon"
		case c == ',':
			state = "after_comma"
		case c == ' ' || c == '\n' || c == '\t':
		case c >= '0' && c <= '9' || c == '-' || state == "in_number" && strings.IndexByte(".eE+", c) >= 0:
			state = "in_number"
		default:
			state = "in_literal"
		}
		next := s[k]
		kind := state
		switch {
		case inStr && esc:
			kind = "in_escape"
		case inStr && isKey:
			kind = "in_key"
		case inStr:
			kind = "in_string"
		case state == "in_number" && !(next >= '0' && next <= '9' || strings.IndexByte(".eE+-", next) >= 0):
			kind = "after_number" // the digits so far are a whole number
		case state == "in_literal" && !(next >= 'a' && next <= 'z'):
			kind = "after_value"
		}
		if kind == "after_value" && len(stack) == 1 && strings.TrimSpace(s[k:]) == "}" {
			kind = "before_final_brace"
		} else if kind == "after_value" && len(stack) > 0 && !stack[len(stack)-1].obj {
			kind = "after_element"
		} else if kind == "after_value" {
			kind = "after_member"
		}
		add(kind, k)
	}
	for _, ks := range out {
		sort.Ints(ks)
	}
	return out
}
