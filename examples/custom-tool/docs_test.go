package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// blocks returns the code blocks of one language (the word after the
// opening fence) of a doc of this repository, in their order.
func blocks(t *testing.T, doc, lang string) []string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("../..", doc))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(string(text), -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatalf("%s has no %s blocks", doc, lang)
	}
	return out
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
			t.Errorf("a Go snippet of the docs no frame of this test knows; add one:\n%s", s)
		}
	}
	for key := range frames {
		if _, ok := out[key]; !ok {
			t.Errorf("no Go snippet of the docs contains %q any more; update this test", key)
		}
	}
	return out
}

// docs/tools.md, as a reader would follow it: main.go and main_test.go
// as the page gives them, whole, in a new directory, then the page's
// commands for a module of one's own (the clone it names is this
// repository); the module builds, vets and its test passes.
func TestDocsToolRunsOutside(t *testing.T) {
	t.Parallel() // its go commands run beside the other tests'
	if testing.Short() {
		t.Skip("builds and tests the snippets of docs/tools.md as another module")
	}
	code := frame(t, blocks(t, "docs/tools.md", "go"), map[string]string{
		"func main()":         "%s",
		"func TestCountWords": "%s",
	})
	var recipe string
	for _, b := range blocks(t, "docs/tools.md", "sh") {
		if strings.Contains(b, "go mod init") {
			recipe = b
		}
	}
	if recipe == "" {
		t.Fatal("docs/tools.md has no go.mod recipe (a sh block with go mod init)")
	}
	if t.Failed() {
		return
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, src := range map[string]string{"main.go": code["func main()"], "main_test.go": code["func TestCountWords"]} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for line := range strings.Lines(recipe) {
		args := strings.Fields(line)
		switch {
		case len(args) == 0:
		case len(args) == 4 && strings.Join(args[:3], " ") == "go mod init":
			goMod(t, dir, args[1:]...)
		case len(args) == 5 && strings.Join(args[:4], " ") == "go mod edit -replace" &&
			strings.HasPrefix(args[4], "github.com/agentbull/toolruntime=../toolruntime"):
			goMod(t, dir, "mod", "edit", "-replace", "github.com/agentbull/toolruntime="+root)
		case line == "go mod tidy\n":
			goOutside(t, dir, "mod", "tidy")
		case line == "go test ./...\n":
			goOutside(t, dir, "vet", "./...")
			goOutside(t, dir, "test", "-count=1", "./...")
		case line == "go run .\n":
			// The worker runs until stopped (TestProgram runs the
			// example's); here it is built as go run builds it.
			goOutside(t, dir, "build", "-o", os.DevNull, ".")
		default:
			t.Fatalf("a command of docs/tools.md's go.mod recipe this test does not know: %q", line)
		}
	}
}

// goMod runs a go mod command that needs no network in dir.
func goMod(t *testing.T, dir string, args ...string) {
	t.Helper()
	if out, err := runGo(dir, args...); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
}

// docs/gateway.md compiles in a module outside this one, each snippet in
// a function that gives it what the text before it set up.
func TestDocsGatewayBuildsOutside(t *testing.T) {
	t.Parallel() // its go commands run beside the other tests'
	if testing.Short() {
		t.Skip("builds the snippets of docs/gateway.md as another module")
	}
	code := frame(t, blocks(t, "docs/gateway.md", "go"), map[string]string{
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
