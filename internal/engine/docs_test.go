package engine_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestDocsCommandsRunInCI keeps the docs honest: every command of a sh
// block of README.md and docs/*.md is run, verbatim, by CI. The NATS CLI
// commands, with what they print checked, and the short commands are run
// by scripts/cli-smoke.sh, which also runs each program that would run
// until stopped (or for minutes) with --help, so that its flags parse;
// the test command is .ci/run's. The go.mod recipe of docs/tools.md is
// run by examples/custom-tool's TestDocsToolRunsOutside, and the Go
// blocks of docs/tools.md and docs/gateway.md are built by its tests,
// so no other doc may hold Go code.
func TestDocsCommandsRunInCI(t *testing.T) {
	t.Parallel()
	// What the CI scripts run: their lines but comments.
	var ci strings.Builder
	for _, f := range []string{"scripts/cli-smoke.sh", ".ci/run"} {
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if !strings.HasPrefix(strings.TrimSpace(line), "#") {
				ci.WriteString(line)
			}
		}
	}
	// runs reports whether the scripts hold command as a whole command:
	// after the start of a line, a space, a quote or a parenthesis, and
	// before the end of a line, a quote, a parenthesis, a redirection,
	// a pipe, a brace or a variable argument (wait $pid for wait).
	runs := func(command string) bool {
		re := regexp.MustCompile(`(?m)(^|[\s'"(])` + regexp.QuoteMeta(command) + `($|['")]|\s+(2>|>|&|\||;|\)|\}|\$))`)
		return re.MatchString(ci.String())
	}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../../README.md")
	block := regexp.MustCompile("(?s)```(\\w*)\n(.*?)```")
	comment := regexp.MustCompile(`\s{2,}#\s.*$`)
	nats := 0
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel("../..", doc)
		for _, m := range block.FindAllStringSubmatch(string(text), -1) {
			lang, body := m[1], m[2]
			if lang == "go" && name != "docs/tools.md" && name != "docs/gateway.md" {
				t.Errorf("%s has a Go block that no test builds (only docs/tools.md and docs/gateway.md may):\n%s", name, body)
			}
			if lang != "sh" || name == "docs/tools.md" && strings.Contains(body, "go mod init") {
				continue
			}
			for line := range strings.Lines(body) {
				line = strings.TrimSpace(comment.ReplaceAllString(strings.TrimSuffix(line, "\n"), ""))
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				if strings.HasPrefix(line, "nats ") {
					nats++
				}
				for part := range strings.SplitSeq(line, " && ") {
					if !runs(part) {
						t.Errorf("%s: a command CI does not run (add it to scripts/cli-smoke.sh):\n%s", name, part)
					}
				}
			}
		}
	}
	if nats < 20 {
		t.Errorf("found only %d nats commands in the docs", nats)
	}
}

// TestDocsLinks: every relative link of README.md, docs/*.md and
// deployments/README.md names a file of the repository and, after #, a
// heading of that file (as GitHub makes its anchor: lower case,
// punctuation but - and _ dropped, spaces as -), so that moving a section
// moves its links too.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../../README.md", "../../deployments/README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	code := regexp.MustCompile("`+[^`]*`+")
	for _, doc := range docs {
		name, _ := filepath.Rel("../..", doc)
		for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(prose(t, doc), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), path)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: link to %s: no such file", name, target)
					continue
				}
			}
			if anchor != "" && !slices.Contains(anchors(t, file), anchor) {
				t.Errorf("%s: link to %s: no such heading", name, target)
			}
		}
	}
}

// anchors are the GitHub anchors of a Markdown file's headings.
func anchors(t *testing.T, file string) []string {
	t.Helper()
	var out []string
	for line := range strings.Lines(prose(t, file)) {
		heading, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// prose is a Markdown file without its fenced code blocks.
func prose(t *testing.T, file string) string {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	in := false
	for line := range strings.Lines(string(text)) {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
		}
	}
	return b.String()
}
