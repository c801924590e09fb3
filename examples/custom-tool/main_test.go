package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
	"github.com/agentbull/toolruntime/tool/tooltest"
)

// The tool alone, without NATS: what the model reads for a call.
func TestCountWords(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ args, want string }{
		{`{"text": "the cat and the hat and the bat"}`, "8 words, 5 distinct; most frequent: the (3), and (2), bat (1)"},
		{`{"text": "Go go GO", "top": 1}`, "3 words, 1 distinct; most frequent: go (3)"},
		{`{"text": "a b",}`, "2 words, 2 distinct; most frequent: a (1), b (1)"}, // repaired
		{`{"text": "?!"}`, "Error (invalid_arguments): the text has no words; send the text to count"},
	} {
		if got := tooltest.Check(ctx, countWords, c.args).Output; got != c.want {
			t.Errorf("%s: %q, want %q", c.args, got, c.want)
		}
	}
	for _, args := range []string{`{"text": "x", "top": 0}`, `{"text": "x", "top": 21}`, `{"txt": "x"}`, `{"text": 3}`, `{"text": "` + strings.Repeat("x", 100_001) + `"}`} {
		if out := tooltest.Check(ctx, countWords, args); out.Err == nil || out.Err.Kind != tool.InvalidArguments {
			t.Errorf("%.40s: %v, %q", args, out.Err, out.Output)
		}
	}
}

// The example as a program: it starts its embedded server, lists
// count_words in the catalogs of the turns that bind its category (and
// only those), runs its calls from a step, and stops cleanly on SIGTERM.
func TestProgram(t *testing.T) {
	t.Parallel() // its go commands run beside the other tests'
	if testing.Short() {
		t.Skip("builds and runs the example")
	}
	// The program TestBuildsOutsideTheModule built; in this module when
	// no proxy could be reached for that build.
	bin := exampleBinary(t)
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "custom-tool")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if out, err := exec.Command(goTool, append(append([]string{"build"}, workertest.BuildFlags()...), "-o", bin, ".")...).CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	// Port -1: the embedded server picks a free port, and logs its URL.
	cmd := exec.Command(bin, "--listen", "127.0.0.1:-1", "--monitor-port", "0", "--data-dir", t.TempDir(), "--log-format", "json", "--name", "custom-1")
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := make(chan map[string]any, 10000) // never full: the worker must not block on its log
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l map[string]any
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				lines <- l
			} else {
				t.Logf("not a JSON log line: %s", sc.Text())
			}
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stderr)
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	var url string
	waitLog := func(msg string) map[string]any {
		t.Helper()
		for l := range lines {
			if l["msg"] == msg {
				return l
			}
			if l["level"] == "ERROR" {
				t.Fatalf("the worker logged an error: %v", l)
			}
		}
		t.Fatalf("the worker exited without logging %q: %v", msg, <-done)
		return nil
	}
	url, _ = waitLog("embedded NATS server with JetStream started")["url"].(string)
	connected := waitLog("connected")
	if cats, _ := connected["categories"].(string); !strings.HasSuffix(cats, ",text_tools") {
		t.Errorf("categories %q, want the default ones, then text_tools", cats)
	}

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	g := &workertest.Gateway{T: t, NC: nc, JS: js}
	// "connected" is logged before the worker's service is added.
	workertest.WaitForService(t, nc)
	bound := map[string]bool{"text_tools": true}
	_, names := g.Catalog(protocol.Context{Kind: protocol.KindText, Bindings: bound})
	if !slices.Contains(names, "count_words") || !slices.Contains(names, "todo_write") {
		t.Errorf("catalog of a turn binding text_tools: %v", names)
	}
	if _, names := g.Catalog(protocol.Context{Kind: protocol.KindText}); slices.Contains(names, "count_words") {
		t.Errorf("catalog of a turn not binding text_tools: %v", names)
	}

	outs := g.Run("agent-1", "turn-1", 1, bound,
		workertest.FC("call_1", "count_words", `{"text": "to be or not to be"}`),
		workertest.FC("call_2", "count_words", `{"text": "x", "top": 99}`),
	)
	if o := outs["call_1"]; o.Status != "ok" || o.Item.Output != "6 words, 4 distinct; most frequent: be (2), to (2), not (1)" ||
		o.Activity != "Counting the words of 18 characters" || !strings.Contains(string(o.Details), `"words":6`) {
		t.Errorf("call_1: %s", o.Raw)
	}
	if o := outs["call_2"]; o.Status != "error" || o.Error == nil || o.Error.Kind != "invalid_arguments" || !strings.Contains(o.Item.Output, "/top") {
		t.Errorf("call_2: %s", outs["call_2"].Raw)
	}
	// A turn that does not bind the category cannot call its tool.
	outs = g.Run("agent-1", "turn-2", 1, nil, workertest.FC("call_1", "count_words", `{"text": "a"}`))
	if o := outs["call_1"]; o.Error == nil || o.Error.Kind != "unknown_tool" {
		t.Errorf("unbound call: %s", o.Raw)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLog("worker stopped")
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not exit")
	}
}
