package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// goSnippets returns the Go code blocks of the README section that starts
// with heading and ends at the next heading of its level or above.
func goSnippets(t *testing.T, heading string) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no %q", heading)
	}
	level := strings.Index(heading, " ")
	if end := regexp.MustCompile(`\n#{1,` + strconv.Itoa(level) + `} `).FindStringIndex(section); end != nil {
		section = section[:end[0]]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// frame puts each snippet into the code around it that makes it a Go
// file: the snippet that contains a frame's key goes where %s is. A
// snippet no frame knows fails the test, so that a new one is checked too.
func frame(t *testing.T, snippets []string, frames map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range snippets {
		found := false
		for key, f := range frames {
			if strings.Contains(s, key) {
				out[key] = strings.Replace(f, "%s", s, 1)
				found = true
				break
			}
		}
		if !found {
			t.Errorf("a README snippet no frame of this test knows; add one:\n%s", s)
		}
	}
	for key := range frames {
		if _, ok := out[key]; !ok {
			t.Errorf("no README snippet contains %q any more; update this test", key)
		}
	}
	return out
}

// The "Write a tool" section, as a reader would copy it: the tool, its
// test and its main, in a module outside this one; the test passes.
func TestREADMEToolSectionRunsOutside(t *testing.T) {
	t.Parallel() // its go commands run beside the other tests'
	if testing.Short() {
		t.Skip("builds and tests the README's snippets as another module")
	}
	const imports = "package main\n\nimport (\n\t\"context\"\n\t\"fmt\"\n\t\"strings\"\n\n\t\"github.com/agentbull/toolruntime/tool\"\n\t\"github.com/agentbull/toolruntime/worker\"\n)\n\nvar version = \"0.1.0\"\n\n"
	code := frame(t, goSnippets(t, "### Write a tool"), map[string]string{
		"tool.Def[CountParams]": "%s",
		"func TestCountWords":   "package main\n\nimport (\n\t\"context\"\n\t\"slices\"\n\t\"testing\"\n\n\t\"github.com/agentbull/toolruntime/tool\"\n\t\"github.com/agentbull/toolruntime/tool/tooltest\"\n)\n\n%s",
		"worker.Main":           "%s",
	})
	if t.Failed() {
		return
	}
	dir := outsideModule(t, "example.com/readmetool", map[string]string{
		"main.go":      imports + code["tool.Def[CountParams]"] + "\n" + code["worker.Main"],
		"main_test.go": code["func TestCountWords"],
	})
	goOutside(t, dir, "vet", ".")
	goOutside(t, dir, "test", "-count=1", ".")
}

// The "Write a gateway" section compiles in a module outside this one,
// each snippet in a function that gives it what the text before it set
// up.
func TestREADMEGatewaySectionBuildsOutside(t *testing.T) {
	t.Parallel() // its go commands run beside the other tests'
	if testing.Short() {
		t.Skip("builds the README's snippets as another module")
	}
	code := frame(t, goSnippets(t, "## Write a gateway"), map[string]string{
		"nats.Connect":       "func connect() {\n%s\n_, _, _, _ = nc, gw, tc, err\n}\n",
		"cat.Definitions":    "func catalog(ctx context.Context, gw *gateway.Client, tc protocol.Context) {\n%s\n_, _ = tools, err\n}\n",
		"run.Next":           "func step(ctx context.Context, gw *gateway.Client, tc protocol.Context, n int64, output []json.RawMessage) error {\n%s\n_ = done\nreturn nil\n}\n",
		"gw.WorkflowEvents(": "func tasks(ctx context.Context, gw *gateway.Client) error {\n%s\nreturn err\n}\n\nfunc driveTurn(agentID, turnID string, tc protocol.Context, instructions string) {}\n",
	})
	if t.Failed() {
		return
	}
	src := `package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/protocol"
)

var (
	_ = protocol.KindText
	_ = errors.As
	_ = fmt.Println
	_ = io.EOF
	_ = nats.Connect
	_ = param.Override[responses.ToolUnionParam]
)

func main() {}

`
	for _, c := range code {
		src += c + "\n"
	}
	dir := outsideModule(t, "example.com/readmegateway", map[string]string{"main.go": src})
	goOutside(t, dir, "vet", ".")
}
