package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// hostileSamples are argument shapes written as a hostile or careless
// model would (issue 22, item 8), family by family, each with the verdict
// decided from first principles: one reading is repaired losslessly; two
// readings, a cut or a loss is refused, naming the thing and its byte
// offset. Classes are "hostile_<family>".
func (g *gen) hostileSamples() {
	ok := func(family, tool, args, want string) {
		if !json.Valid([]byte(want)) {
			panic(fmt.Sprintf("hostile %s: want %q is not JSON", family, want))
		}
		g.add("hostile_"+family, tool, "recover", args, want)
	}
	// no refuses args; at, when set, is text in args whose offset the
	// refusal must name ("byte N"), and mention more text it must hold.
	no := func(family, tool, args, at string, mention ...string) {
		if at != "" {
			k := strings.Index(args, at)
			if k < 0 {
				panic(fmt.Sprintf("hostile %s: %q not in %q", family, at, args))
			}
			mention = append(mention, fmt.Sprintf("byte %d", k))
		}
		n := len(g.cases)
		g.add("hostile_"+family, tool, "refuse", args, "")
		if len(g.cases) > n {
			g.cases[n].Mention = mention
		}
	}
	// In double-quoted strings, in each of three string fields.
	type field struct{ tool, pre, post, wantPre, wantPost string }
	fields := []field{
		{"write_file", `{"path": "a.txt", "content": "x`, `y"}`, `{"path":"a.txt","content":"x`, `y"}`},
		{"run_command", `{"command": "printf '`, `'", "timeout_seconds": 30}`, `{"command":"printf '`, `'","timeout_seconds":30}`},
		{"slack_post_message", `{"channel": "#ops", "text": "`, ` done"}`, `{"channel":"#ops","text":"`, ` done"}`},
	}

	// Escapes JSON lacks that Python, JavaScript, C, Go, Rust, JSON5,
	// Bash or Ruby read as a character: two readings, refused at the
	// backslash, with the escape named.
	for _, esc := range []string{
		`\x1b`, `\x41`, `\xE9`, `\xff`, `\U0001F680`, `\U00000041`, `\U0011FFFF`,
		`\0`, `\00`, `\000`, `\012`, `\1`, `\7`, `\377`, `\400`, `\777`,
		`\v`, `\a`, `\e`, `\'`, `\u{1F680}`, `\u{41}`, `\N{BULLET}`, `\N{LATIN SMALL LETTER E WITH ACUTE}`,
	} {
		for _, f := range fields {
			no("escapes", f.tool, f.pre+esc+f.post, esc, strings.TrimSuffix(esc[:min(len(esc), 3)], "{"))
		}
	}
	// Incomplete escapes: cut-offs or mistakes, refused.
	for _, esc := range []string{`\xA`, `\x4`, `\U1F680`, `\U0001F68`, `\u00A`, `\u12`, `\u1`, `\uD834\uDd`} {
		for _, f := range fields {
			no("escapes_incomplete", f.tool, f.pre+esc+"z"+f.post, esc[strings.LastIndexByte(esc, '\\'):], "incomplete")
		}
	}
	// Lone, split or reversed surrogates: no text, refused.
	for _, esc := range []string{`\ud800`, `\uDFFF`, `\ud83d\u0041`, `\ude80\ud83d`, `\ud83d\\ude80`, `\ud83d \ude80`, `\uD83D\uDE80\uDE80`, `\uD83D\uD83D\uDE80`} {
		for _, f := range fields {
			no("surrogates", f.tool, f.pre+esc+f.post, "")
		}
	}
	// Escapes no common language reads as a character stay as written:
	// a backslash and the character; JSON's own escapes are JSON's.
	for _, e := range []struct{ in, want string }{
		{`\d`, `\\d`}, {`\s`, `\\s`}, {`\w`, `\\w`}, {`\.`, `\\.`}, {`\8`, `\\8`}, {`\9`, `\\9`},
		{`\$`, `\\$`}, {`\%`, `\\%`}, {`\q`, `\\q`}, {`\ `, `\\ `}, {`\(`, `\\(`}, {`\[`, `\\[`},
		{`\-`, `\\-`}, {`\é`, `\\é`}, {`\xyz`, `\\xyz`}, {`\Users`, `\\Users`}, {`\users`, `\\users`},
		{`\/`, `/`}, {`\ud83d\ude80`, `🚀`}, {`\u00e9`, `é`}, {`\u0000`, `\u0000`}, {`\uFFFF`, `\uffff`},
		{`\b\f\n\r\t`, `\b\f\n\r\t`}, {`\\x1b`, `\\x1b`}, {`\\0`, `\\0`}, {`\\u00e9`, `\\u00e9`},
	} {
		for _, f := range fields {
			ok("escapes_kept", f.tool, f.pre+e.in+f.post, f.wantPre+e.want+f.wantPost)
		}
	}
	// Between single quotes (Python's repr): its escapes are characters;
	// where Python and JavaScript differ, refused.
	for _, e := range []struct{ in, want string }{
		{`\x1b`, `\u001b`}, {`\xe9`, `é`}, {`\U0001F680`, `🚀`}, {`\u00e9`, `é`}, {`\'`, `'`}, {`\"`, `\"`},
		{`\d`, `\\d`}, {`\\`, `\\`}, {`\n`, `\n`}, {`it\'s`, `it's`}, {`say "hi"`, `say \"hi\"`},
	} {
		ok("single_quotes", "slack_post_message", `{'channel': '#a', 'text': '`+e.in+`'}`, `{"channel":"#a","text":"`+e.want+`"}`)
		ok("single_quotes", "write_file", `{"path": 'a', "content": '`+e.in+`'}`, `{"path":"a","content":"`+e.want+`"}`)
	}
	for _, esc := range []string{`\/`, "\\\n", "\\\r\n", "\\\u2028", "\\\u2029", `\0`, `\v`, `\a`, `\N{BULLET}`, `\u{41}`, `\x4`, `\U0011FFFF`} {
		no("single_quotes", "slack_post_message", `{'channel': '#a', 'text': 'x`+esc+`y'}`, esc)
	}
	no("single_quotes", "slack_post_message", `{'channel': '#a', 'text': 'it's'}`, "")
	no("single_quotes", "slack_post_message", `{"channel": "#a", "text": "it\'s"}`, `\'`)

	// Line continuations between double quotes: the raw line break is
	// content, and so is the backslash before it (a shell command's).
	ok("continuation", "run_command", "{\"command\": \"make \\\n  all\"}", `{"command":"make \\\n  all"}`)
	ok("continuation", "run_command", "{\"command\": \"make \\\r\n  all\"}", `{"command":"make \\\r\n  all"}`)

	// Raw bytes: invalid UTF-8 (overlong, CESU-8, past U+10FFFF, a lone
	// continuation byte, a character cut in two) in a string is refused
	// at its byte; outside strings, in prose, it is prose.
	for _, b := range []string{"\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\xbd\xed\xba\x80", "\xed\xb2\x80", "\xf4\x90\x80\x80", "\x80", "\xe2\x82z", "\xff\xfe", "\xf8\x88\x80\x80\x80"} {
		for _, f := range fields {
			no("raw_bytes", f.tool, f.pre+b+f.post, b[:1], fmt.Sprintf("0x%02x", b[0]))
		}
		no("raw_bytes", "write_file", "{'path': 'a', 'content': 'x"+b+"'}", b[:1], fmt.Sprintf("0x%02x", b[0]))
	}
	ok("raw_bytes", "run_command", "Here \xff you go: {\"command\": \"ls\"}", `{"command":"ls"}`)
	ok("raw_bytes", "run_command", "{\"command\": \"ls\"} \xc0\xaf", `{"command":"ls"}`)
	// NUL, BOM and U+2028: in a string they are content; between tokens
	// a BOM or U+2028 is white space; a raw NUL in a string is a control
	// character escaped.
	for _, c := range []struct{ in, want string }{{"\x00", `\u0000`}, {"\uFEFF", "\uFEFF"}, {"\u2028", "\u2028"}, {"\u2029", "\u2029"}, {"\u0085", "\u0085"}} {
		for _, f := range fields {
			ok("invisible", f.tool, f.pre+c.in+f.post, f.wantPre+c.want+f.wantPost)
		}
	}
	ok("invisible", "run_command", "\uFEFF\uFEFF{\"command\": \"ls\"}", `{"command":"ls"}`)
	ok("invisible", "run_command", "{\u2028\"command\":\u2028\"ls\"\u2029}", `{"command":"ls"}`)
	ok("invisible", "run_command", "\u2028{\"command\": \"ls\"}\u2028", `{"command":"ls"}`)
	no("invisible", "run_command", "{\"command\": \"ls\"}\x00", "\x00")

	// Numbers: JSON's grammar only; what is not JSON is refused (no
	// guess of what +1, 0x10 or 1_000 meant); what is JSON runs exactly
	// as written, sign of zero and digits kept.
	for _, nm := range []string{"+1", ".5", "5.", "+.5", "1.e5", "0x10", "0X1F", "0b101", "0o17", "1_000", "01", "00", "-01", "NaN", "-NaN", "Infinity", "-Infinity", "inf", "1n", "1L", "1f", "--1", "- 1", "1.5.2", "1e", "1e+", "１", "١"} {
		// Named where the reader stops in the number: at it or in it.
		no("numbers", "create_schedule", `{"name": "n", "cron": "* * * * *", "prompt": "p", "jitter_seconds": `+nm+`}`, "", "/jitter_seconds")
		no("numbers", "read_file", `{"path": "a", "offset": `+nm+`}`, "", "/offset")
	}
	// Out of a float64's range: too large, or not 0 but read as 0.
	for _, nm := range []string{"-1e-400", "1e-400", "0.1e-399", "2e-324"} {
		no("numbers", "create_schedule", `{"name": "n", "cron": "* * * * *", "prompt": "p", "jitter_seconds": `+nm+`}`, nm, "too small")
		no("numbers", "read_file", `{"path": "a", "offset": `+nm+`}`, nm, "too small")
		no("numbers", "sql_execute", `{'sql': 'x', 'params': [`+nm+`,]}`, nm, "too small")
	}
	for _, nm := range []string{"1e400", "-1e400", "1E+400"} {
		no("numbers", "create_schedule", `{"name": "n", "cron": "* * * * *", "prompt": "p", "jitter_seconds": `+nm+`}`, "")
	}
	for _, nm := range []string{"-0", "-0.0", "-0e0", "-0E-0", "0.0", "2e2", "2E+2", "1.50", "4.9e-324", "1e-300", "9007199254740993", "12345678901234567890", "-12345678901234567890", "1.000000000000000000000000000001", "123456789012345678901234567890.5"} {
		ok("numbers", "create_schedule", `{"name": "n", "cron": "* * * * *", "prompt": "p", "jitter_seconds": `+nm+`}`, `{"name":"n","cron":"* * * * *","prompt":"p","jitter_seconds":`+nm+`}`)
		ok("numbers", "sql_execute", `{'sql': 'x', 'params': [`+nm+`, `+nm+`,]}`, `{"sql":"x","params":[`+nm+`,`+nm+`]}`)
	}
	for _, nm := range []string{"0", "-0", "1.0", "1e2", "10E-1", "12345678901234567890", "100000000000000000000000000000"} {
		ok("numbers", "read_file", `{"path": "a", "offset": `+nm+`}`, `{"path":"a","offset":`+nm+`}`)
	}
	for _, nm := range []string{"1.5", "-1", "1e-1", "-0.5"} {
		no("numbers", "read_file", `{"path": "a", "offset": `+nm+`}`, "") // the schema: an integer, at least 0
	}

	// Literals: Python's are one reading; JavaScript's undefined, NaN,
	// and other spellings are not JSON values and are refused.
	ok("literals", "web_search", `{"query": "q", "recency_days": None}`, `{"query":"q","recency_days":null}`)
	ok("literals", "sql_execute", `{"sql": "x", "params": [True, False, None], "transaction": False}`, `{"sql":"x","params":[true,false,null],"transaction":false}`)
	ok("literals", "submit_result", `{'result': {'ok': True, 'v': None, 's': 'None', 't': "True"}}`, `{"result":{"ok":true,"v":null,"s":"None","t":"True"}}`)
	for _, lit := range []string{"undefined", "TRUE", "FALSE", "NULL", "Null", "nil", "yes", "no", "on", "void 0", "!0", "True()", "null_"} {
		no("literals", "web_search", `{"query": "q", "recency_days": `+lit+`}`, "")
	}
	for _, k := range []string{"True", "False", "None"} {
		no("literals", "submit_result", `{"result": {`+k+`: 1}}`, k+":")
	}

	// Comments and commas.
	ok("comments", "run_command", "{\"command\": \"ls\" // list\n}", `{"command":"ls"}`)
	ok("comments", "run_command", `{/* a */"command"/* b */:/* c */"ls"/* d */}`, `{"command":"ls"}`)
	ok("comments", "run_command", `{"command": "ls /*not a comment*/ // nor this"}`, `{"command":"ls /*not a comment*/ // nor this"}`)
	ok("comments", "sql_execute", `{"sql": "x", "params": [1, /* 2, */ 3]}`, `{"sql":"x","params":[1,3]}`)
	no("comments", "run_command", `{"command": "ls" /* unclosed}`, "")
	no("comments", "run_command", "{\"command\": \"ls\" # shell comment\n}", "#")
	no("comments", "run_command", `{"command": "ls"} // {"command": "rm -rf /"}`, "")
	ok("commas", "sql_execute", `{"sql": "x", "params": [1, 2,],}`, `{"sql":"x","params":[1,2]}`)
	ok("commas", "sql_execute", "{\"sql\": \"x\",\n  \"params\": [1]\n  ,\n}", `{"sql":"x","params":[1]}`)
	no("commas", "sql_execute", `{"sql": "x", "params": [1,, 2]}`, "")
	no("commas", "sql_execute", `{"sql": "x", "params": [, 1]}`, "")
	no("commas", "sql_execute", `{, "sql": "x"}`, "")
	no("commas", "sql_execute", `{"sql": "x",,}`, "")
	no("commas", "sql_execute", `{"sql": "x", "params": [1 2]}`, "") // [1 2]: no comma between elements is not read
	no("commas", "sql_execute", `{"sql": "x", "params": [1 -2]}`, "")
	no("commas", "sql_execute", `{"sql": "x", "params": ["a" "b"]}`, "") // Python concatenates: "ab"

	// Keys: unquoted and single-quoted keys have one reading; a key sent
	// twice, with the same value or another, spelled the same or not,
	// is refused.
	ok("keys", "run_command", `{command: "ls", timeout_seconds: 5}`, `{"command":"ls","timeout_seconds":5}`)
	ok("keys", "submit_result", `{result: {$ref: 1, _x: 2, a1: 3}}`, `{"result":{"$ref":1,"_x":2,"a1":3}}`)
	for _, dup := range []string{
		`{"command": "ls", "command": "rm -rf /"}`, `{"command": "ls", "command": "ls"}`,
		`{"command": "ls", 'command': "rm"}`, `{"command": "ls", command: "rm"}`,
		`{"command": "ls", "\u0063ommand": "rm"}`, `{"command": "ls", "comm\u0061nd": "ls"}`,
	} {
		no("keys", "run_command", dup, "", "more than once")
	}
	no("keys", "submit_result", `{"result": {"a": {"b": 1, "b": 2}}}`, "", "/result/a/b")
	no("keys", "submit_result", `{"result": {"k": 1}, "result": {"k": 1}}`, "", "/result")

	// Fences.
	obj := `{"command": "ls"}`
	want := `{"command":"ls"}`
	for _, f := range []string{
		"```json5\n{command: 'ls',}\n```", "~~~\n" + obj + "\n~~~", "~~~json\n" + obj + "\n~~~",
		"````json\n" + obj + "\n````", "```json\r\n" + obj + "\r\n```\r\n", "```jsonc\n" + obj + " // c\n```",
		"Here:\n\n```json\n" + obj + "\n```\n\nDone.",
		"```json\n" + obj + "\n", "```json\n" + obj, "```\n\"{\\\"command\\\": \\\"ls\\\"}\"\n```",
		"```json\n" + obj + "\n```\nThat runs `ls` in the {current} directory.",
	} {
		ok("fences", "run_command", f, want)
	}
	no("fences", "run_command", "```json\n"+obj+"\n```\n```json\n{\"command\": \"rm\"}\n```", "", "more than one")
	no("fences", "run_command", "```json\n"+obj+"\n```\n```json\n"+obj+"\n```", "", "more than one")
	no("fences", "run_command", "First: ```"+obj+"``` then ```{\"command\": \"pwd\"}```", "", "more than one")
	no("fences", "run_command", "```json\n{\"command\": \"ls\"\n```", "")
	// An info string that is itself a JSON object: two objects in the text.
	no("fences", "run_command", "```json {\"title\": \"x\"}\n"+obj+"\n```", "", "more than one")

	// A JSON string holding the object, JSON encoded twice (a string
	// holding that string) and three times; a fourth layer is too many.
	one := `{"command": "ls -la"}`
	two := jsonString(one)
	three := jsonString(jsonString(two))
	four := jsonString(three)
	ok("encoded", "run_command", two, `{"command":"ls -la"}`)
	ok("encoded", "run_command", jsonString(two), `{"command":"ls -la"}`)
	ok("encoded", "run_command", three, `{"command":"ls -la"}`)
	ok("encoded", "run_command", "Here you go: "+three, `{"command":"ls -la"}`)
	ok("encoded", "run_command", "<tool_call>"+three+"</tool_call>", `{"command":"ls -la"}`)
	ok("encoded", "run_command", jsonString(jsonString(`{'command': 'ls -la',}`)), `{"command":"ls -la"}`)
	ok("encoded", "submit_result", `{"result": "{\"a\": 1}"}`, `{"result":{"a":1}}`)
	no("encoded", "run_command", four, "")
	no("encoded", "run_command", three+" "+obj, "", "more than one")
	no("encoded", "run_command", jsonString(jsonString(`{"command": "\ud800"}`)), "", `\ud800`)
	no("encoded", "run_command", jsonString(`{"command": "ls"`), "", "cut off")

	// Prose with braces around the object.
	for _, p := range []struct{ pre, post string }{
		{"Use {braces} like {this}: ", ""}, {"", " — then use {braces}"}, {"I'll call it with ", " (the {x} is filled)."},
		{"Set {name} first.\n", "\nDone {ok}"}, {"Function f(x) { return x } — ", ""},
	} {
		ok("prose", "run_command", p.pre+obj+p.post, want)
	}
	no("prose", "run_command", "The object {} is empty; "+obj, "", "more than one")
	no("prose", "run_command", "Not "+`{"command": "rm"}`+" but "+obj, "", "more than one")
	no("prose", "run_command", "Use `"+`{"command": "pwd"}`+"` or "+obj, "", "more than one")

	// Wrappers: tool-call tags around the object are packaging; an array
	// at the root or an {"arguments": …} envelope is a value the schema
	// refuses (unwrapping it would guess which element or key is meant).
	for _, w := range []struct{ pre, post string }{
		{"<tool_call>", "</tool_call>"}, {"<tool_call>\n", "\n</tool_call>"}, {"<function=run_command>", "</function>"},
		{"<|python_tag|>", "<|eom_id|>"}, {"[TOOL_CALLS]", ""}, {"<tool_call>", ""}, {"", "</tool_call>"},
	} {
		ok("wrappers", "run_command", w.pre+obj+w.post, want)
	}
	no("wrappers", "run_command", "<tool_call>"+obj+"</tool_call>\n<tool_call>{\"command\": \"pwd\"}</tool_call>", "", "more than one")
	no("wrappers", "run_command", "["+obj+"]", "")
	no("wrappers", "run_command", "["+obj+", {\"command\": \"pwd\"}]", "")
	no("wrappers", "run_command", `{"arguments": `+obj+`}`, "")
	no("wrappers", "run_command", `{"name": "run_command", "arguments": `+obj+`}`, "")
	no("wrappers", "run_command", `{"arguments": `+jsonString(obj)+`}`, "")
	no("wrappers", "run_command", `<tool_call>{"name": "run_command", "arguments": `+obj+`}</tool_call>`, "")

	// Truncation: mid-escape, mid-number, mid-key, mid-literal, inside
	// a surrogate pair or a UTF-8 character: refused as cut off.
	for _, cut := range []string{
		`{"command": "a\`, `{"command": "a\u`, `{"command": "a\u00`, `{"command": "a\ud83d`, `{"command": "a\ud83d\`,
		`{"command": "a\ud83d\u`, `{"command": "a\ud83d\ude8`, `{'command': 'a\x1`, `{'command': 'a\U0001F6`,
		`{"command": "ls", "timeout_seconds": 1`, `{"command": "ls", "timeout_seconds": -`, `{"command": "ls", "timeout_seconds": 1.`,
		`{"command": "ls", "timeout_seconds": 1e`, `{"command": "ls", "timeout_seconds": 1e-`,
		`{"comm`, `{"command\`, `{comm`, `{'comm`, `{"command": "ls", "timeout_s`,
		`{"command": tr`, `{"command": "ls", "x": Tru`, `{"command": "ls", "x": nul`,
		"{\"command\": \"caf\xc3", "{\"command\": \"\xf0\x9f\x9a", "```json\n{\"command\": \"ls", "<tool_call>{\"command\": \"ls\",",
		`{"command": "ls" /* note`, `"{\"command\": \"ls`, `{"command": "ls", "timeout_seconds": 30`,
	} {
		no("cut", "run_command", cut, "", "cut off")
	}

	// Depth and width: refused over MaxDepth with a bounded message; a
	// wide value runs whole; a fault deep or far in is named briefly.
	no("deep", "submit_result", `{"result": `+strings.Repeat(`{"a":`, 10000)+"1"+strings.Repeat("}", 10000)+`}`, "", "512")
	no("deep", "submit_result", `{"result": `+strings.Repeat(`[`, 20000)+strings.Repeat("]", 20000)+`}`, "", "512")
	no("deep", "submit_result", `{'result': `+strings.Repeat(`{'a': [`, 3000)+"1"+strings.Repeat("]}", 3000)+`}`, "", "512")
	no("deep", "submit_result", `{"result": `+strings.Repeat(`{"a":`, 400)+`"\x1b"`+strings.Repeat("}", 400)+`}`, `\x1b`)
	no("deep", "submit_result", `{"result": `+strings.Repeat(`{"a":`, 5000), "", "512")
	var wide strings.Builder
	var wideWant strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&wide, "%q: %d, ", fmt.Sprint("k", i), i)
		if i > 0 {
			wideWant.WriteString(",")
		}
		fmt.Fprintf(&wideWant, "%q:%d", fmt.Sprint("k", i), i)
	}
	ok("wide", "submit_result", `{"result": {`+wide.String()+`}}`, `{"result":{`+wideWant.String()+`}}`)
	no("wide", "submit_result", `{"result": {`+wide.String()+`"k4999": 0}}`, "", "more than once")
	no("wide", "submit_result", `{"result": {`+wide.String()+`"z": "\x1b"}}`, `\x1b`)
	no("wide", "sql_execute", `{"sql": "x", "params": [`+strings.Repeat("1, ", 10000)+`"\ud800"]}`, `\ud800`)
	no("wide", "write_file", `{"path": "a", "content": "`+strings.Repeat("é", 20000)+`\0"}`, `\0`)
}
