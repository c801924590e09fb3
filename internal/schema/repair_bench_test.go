package schema

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// benchObject returns compact JSON arguments of about size bytes: members
// with a string holding escapes (\n, \t, \\d), a number, booleans and null,
// so that every rung has something to change in proportion to the size.
// Its strings hold no quote or apostrophe, so that the rewrites below are
// plain text replacements.
func benchObject(size int) string {
	var b strings.Builder
	b.WriteString(`{"path":"src/handlers/user_profile.go","items":[`)
	for i := 0; b.Len() < size-60; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"item %d","text":"first line\nsecond\tline with \\d{3} café","n":%d,"ok":true,"none":null}`, i, i*37)
	}
	b.WriteString(`],"mode":420,"dry_run":false}`)
	return b.String()
}

var benchKeys = regexp.MustCompile(`"([a-z_]+)":`)

// benchRungs builds, from valid arguments, the input that exercises each
// rung alone.
var benchRungs = []struct {
	name string
	make func(string) string
}{
	{"as_sent", func(s string) string { return s }},
	{RungStripFences, func(s string) string { return "Here are the arguments:\n```json\n" + s + "\n```\nLet me know." }},
	{RungDoubleEncoded, func(s string) string { return jsonQuote(s) }},
	{RungWrappingBraces, func(s string) string { return "{" + s + "}" }},
	{RungExtraCloser, func(s string) string { return s + "}" }},
	{RungComments, func(s string) string { return strings.ReplaceAll(s, `,"`, `, /* c */ "`) }},
	{RungTrailingCommas, func(s string) string { return strings.ReplaceAll(s, "}", ",}") }},
	{RungMissingCommas, func(s string) string { return strings.ReplaceAll(s, `,"`, ` "`) }},
	{RungUnquotedKeys, func(s string) string { return benchKeys.ReplaceAllString(s, "$1:") }},
	{RungSingleQuotes, func(s string) string { return strings.ReplaceAll(s, `"`, `'`) }},
	{RungPythonLiterals, func(s string) string {
		return strings.NewReplacer("true", "True", "false", "False", "null", "None").Replace(s)
	}},
	{RungControlChars, func(s string) string { return strings.NewReplacer(`\n`, "\n", `\t`, "\t").Replace(s) }},
	{RungInvalidEscapes, func(s string) string { return strings.ReplaceAll(s, `\\d`, `\d`) }},
	{RungUnicodeSpaces, func(s string) string { return strings.ReplaceAll(s, `":`, "\":\u00a0") }},
	{"refused_cut", func(s string) string { return s[:len(s)-len(`,"dry_run":false}`)] }},
}

func jsonQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

// BenchmarkRepair is the cost of each rung alone on arguments of 200 B,
// 4 KiB and 256 KiB (the input grows a little with the rung's damage).
func BenchmarkRepair(b *testing.B) {
	for _, size := range []int{200, 4 << 10, 256 << 10} {
		valid := benchObject(size)
		for _, rung := range benchRungs {
			in := rung.make(valid)
			b.Run(fmt.Sprintf("%s/%s", rung.name, sizeName(size)), func(b *testing.B) {
				_, rungs, err := Repair(in, RepairOptions{})
				if rung.name == "refused_cut" {
					if err == nil {
						b.Fatal("a cut was repaired")
					}
				} else if err != nil || (rung.name != "as_sent" && (len(rungs) != 1 || rungs[0] != rung.name)) {
					b.Fatalf("rungs %q, %v", rungs, err)
				}
				b.SetBytes(int64(len(in)))
				b.ReportAllocs()
				for b.Loop() {
					Repair(in, RepairOptions{})
				}
			})
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
