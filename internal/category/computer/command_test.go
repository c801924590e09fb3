package computer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

func details(t *testing.T, res tool.Result) *computer.CommandDetails {
	t.Helper()
	d, ok := res.Details.(*computer.CommandDetails)
	if !ok {
		t.Fatalf("details are %T, want *computer.CommandDetails", res.Details)
	}
	return d
}

func TestRunCommand(t *testing.T) {
	needSandbox(t)
	t.Setenv("WORKER_SECRET", "do-not-leak")
	c := newCategory(t, computer.Config{Env: []string{"EXTRA=1"}})
	h := home(t, c, agent)
	tests := []struct {
		name    string
		command string
		want    []string
		absent  []string
		exit    int
		signal  string
	}{
		{name: "output and status", command: "echo hello", want: []string{"hello\n", "[exit status 0]"}},
		{name: "failure is reported, not an error", command: "echo oops >&2; exit 3", want: []string{"oops\n", "[exit status 3]"}, exit: 3},
		{name: "stdout and stderr interleaved", command: "echo one; echo two >&2; echo three", want: []string{"one\ntwo\nthree\n"}},
		{name: "no output", command: "true", want: []string{"(no output)\n[exit status 0]"}},
		{name: "runs in the home", command: "pwd", want: []string{h + "\n"}},
		{name: "scrubbed environment", command: "env | sort",
			want:   []string{"HOME=" + h + "\n", "PATH=" + computer.DefaultPath + "\n", "LANG=C.UTF-8\n", "TMPDIR=" + filepath.Join(h, ".tmp") + "\n", "EXTRA=1\n"},
			absent: []string{"WORKER_SECRET", "do-not-leak", "GOPATH", "GOFLAGS"}},
		{name: "TMPDIR exists", command: `test -d "$TMPDIR" && echo tmp ok`, want: []string{"tmp ok"}},
		{name: "stdin is empty", command: "cat; echo read all", want: []string{"read all"}},
		{name: "killed by a signal", command: "kill -KILL $$", want: []string{"[killed by signal killed (exit status 137)]"}, exit: 137, signal: "killed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := run(t, c, computer.RunCommandName, map[string]any{"command": tt.command})
			if err != nil {
				t.Fatalf("run_command: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Content, w) {
					t.Errorf("output lacks %q:\n%s", w, res.Content)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(res.Content, a) {
					t.Errorf("output has %q:\n%s", a, res.Content)
				}
			}
			d := details(t, res)
			if d.ExitCode != tt.exit || d.Signal != tt.signal {
				t.Errorf("exit %d signal %q, want %d %q", d.ExitCode, d.Signal, tt.exit, tt.signal)
			}
			// A command that printed nothing leaves no log. (Each case
			// removes its log: they share the call's name.)
			log := filepath.Join(h, ".outputs", "t1.0.call_run_command.log")
			_, statErr := os.Stat(log)
			_ = os.Remove(log)
			if d.OutputBytes == 0 {
				if d.LogPath != "" || !os.IsNotExist(statErr) {
					t.Errorf("no output, yet log path %q (stat: %v)", d.LogPath, statErr)
				}
			} else if d.LogPath != ".outputs/t1.0.call_run_command.log" || statErr != nil {
				t.Errorf("log path %q (stat: %v)", d.LogPath, statErr)
			}
		})
	}
}

// The full output is kept in the home and its path is in the details.
func TestRunCommandKeepsTheLog(t *testing.T) {
	needSandbox(t)
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	res, err := run(t, c, computer.RunCommandName, map[string]any{"command": "echo kept"})
	if err != nil {
		t.Fatal(err)
	}
	d := details(t, res)
	if got := readFile(t, filepath.Join(h, d.LogPath)); got != "kept\n" || d.LogBytes != 5 {
		t.Errorf("log %q (%d bytes)", got, d.LogBytes)
	}
	// A call id that is not a plain file name is replaced by a digest.
	inv, err := tools.Prepare(findTool(t, c, computer.RunCommandName), `{"command":"echo x"}`, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err = inv.Run(tools.WithCall(context.Background(), tool.Call{AgentID: agent, TurnID: "t1", CallID: "../../etc/passwd"}))
	if err != nil {
		t.Fatal(err)
	}
	if d := details(t, res); !strings.HasPrefix(d.LogPath, ".outputs/t1.0.call-") || strings.Contains(d.LogPath, "..") {
		t.Errorf("log path %q", d.LogPath)
	}
}

// A command that hangs ends at its time limit with kind timeout, and
// neither it nor what it started is left running.
func TestRunCommandTimeoutKillsTheGroup(t *testing.T) {
	needSandbox(t)
	c := newCategory(t, computer.Config{CommandTimeout: time.Second})
	m := marker()
	res, err := run(t, c, computer.RunCommandName, map[string]any{
		"command": `sleep ` + m + ` & echo started; setsid sleep ` + m + ` & wait`,
	})
	if kindOf(err) != tool.Timeout {
		t.Fatalf("err = %v, want kind timeout", err)
	}
	d := details(t, res)
	if !d.TimedOut || !strings.Contains(res.Content, "started\n") || !strings.Contains(res.Content, "[timed out after 1 s") {
		t.Errorf("result %q, details %+v", res.Content, d)
	}
	assertNoProcess(t, "a sleep of the timed out command", m)
	inv, _ := tools.Prepare(findTool(t, c, computer.RunCommandName), `{"command":"sleep 1000"}`, 0)
	if got := inv.CompletedActivity(res); got != "Ran `sleep 1000` (timed out)" {
		t.Errorf("completed activity %q", got)
	}
}

// The call's own time limit asks for less than the default.
func TestRunCommandTimeoutParameter(t *testing.T) {
	needSandbox(t)
	c := newCategory(t, computer.Config{CommandTimeout: time.Hour, MaxCommandTimeout: time.Hour})
	_, err := run(t, c, computer.RunCommandName, map[string]any{"command": "sleep 1000", "timeout_seconds": 1})
	if kindOf(err) != tool.Timeout || !strings.Contains(err.Error(), "within 1 s") {
		t.Fatalf("err = %v, want a timeout after 1s", err)
	}
	// More than the worker allows is lowered, and the answer says so.
	c = newCategory(t, computer.Config{CommandTimeout: time.Second, MaxCommandTimeout: 2 * time.Second})
	res, err := run(t, c, computer.RunCommandName, map[string]any{"command": "echo hi", "timeout_seconds": 100})
	if err != nil || !strings.Contains(res.Content, "lowered from 100 s to the worker's maximum of 2 s") {
		t.Errorf("%q, %v", res.Content, err)
	}
}

// Aborting the call (the turn's cancel) kills the command and everything
// it started, at once.
func TestRunCommandAbort(t *testing.T) {
	needSandbox(t)
	c := newCategory(t, computer.Config{})
	m := marker()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	type outcome struct {
		res tool.Result
		err error
	}
	done := make(chan outcome, 1)
	rc := findTool(t, c, computer.RunCommandName)
	go func() {
		inv, err := tools.Prepare(rc, `{"command":"sleep `+m+` & nohup sleep `+m+` >/dev/null 2>&1 & wait"}`, 0)
		if err != nil {
			done <- outcome{err: err}
			return
		}
		res, err := inv.Run(callCtx(ctx, agent, "abort"))
		done <- outcome{res, err}
	}()
	waitFor(t, "the command to start its children", func() bool { return len(hostProcs(m)) == 2 })
	cancel(errors.New("turn cancelled"))
	o := <-done
	if kindOf(o.err) != tool.Aborted || !strings.Contains(o.err.Error(), "turn cancelled") {
		t.Fatalf("err = %v, want kind aborted with the cause", o.err)
	}
	if d := details(t, o.res); !d.Aborted {
		t.Errorf("details %+v", d)
	}
	assertNoProcess(t, "a sleep of the aborted command", m)
}

// A command that ends but leaves a background process behind: the
// process is killed with the sandbox, however it hid (its own session,
// nohup, a double fork, output detached or not), and the answer says so.
func TestRunCommandLeavesNothingBehind(t *testing.T) {
	needSandbox(t)
	c := newCategory(t, computer.Config{})
	for _, command := range []string{
		`sleep %s > /dev/null 2>&1 &`,              // output detached
		`sleep %s &`,                               // holds the output pipe open
		`setsid sleep %s > /dev/null 2>&1 &`,       // a session of its own
		`nohup setsid sleep %s > /dev/null 2>&1 &`, // the probe
		`(sleep %s > /dev/null 2>&1 &) &`,          // double fork: reparented
		`sh -c 'trap "" HUP TERM; exec sleep %s' > /dev/null 2>&1 &`,
	} {
		m := marker()
		command = fmt.Sprintf(command, m) + ` sleep 0; while ! ps -eo args | grep -q "^sleep ` + m + `"; do :; done; echo up`
		res, err := run(t, c, computer.RunCommandName, map[string]any{"command": command})
		if err != nil {
			t.Fatalf("%s: %v", command, err)
		}
		if d := details(t, res); d.ExitCode != 0 || !d.KilledLeftovers || d.PipeHeld || !strings.Contains(res.Content, "left running in the background were killed") {
			t.Errorf("%s: %+v\n%s", command, d, res.Content)
		}
		assertNoProcess(t, "the background sleep of "+command, m)
	}
}

// A flood of output reaches the model as head and tail within the budget;
// the log keeps what it may and counts the rest.
func TestRunCommandFlood(t *testing.T) {
	needSandbox(t)
	const budget = 4 << 10
	c := newCategory(t, computer.Config{OutputBudget: budget, MaxLogBytes: 1 << 20})
	h := home(t, c, agent)
	tests := []struct {
		command    string
		total      int64
		head, tail string
	}{
		// 5 MB and 1.9 MB, not 50 MB and 14.9 MB: both are still far past
		// the 1 MiB log and the 4 KiB budget, all of it counted, and
		// pumping the bytes through the sandbox is this test's time.
		{"yes | head -c 5000000", 5_000_000, "y\ny\ny\n", "y\ny\ny\n"},
		{"seq 1 300000", 1_988_895, "1\n2\n3\n4\n", "299999\n300000\n"},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			res, err := run(t, c, computer.RunCommandName, map[string]any{"command": tt.command})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Content) > budget {
				t.Errorf("the model gets %d bytes, over the %d byte budget", len(res.Content), budget)
			}
			d := details(t, res)
			if d.OutputBytes != tt.total || !d.Truncated || !d.LogTruncated || d.LogBytes != 1<<20 {
				t.Errorf("details %+v", d)
			}
			if fi, err := os.Stat(filepath.Join(h, d.LogPath)); err != nil || fi.Size() != 1<<20 {
				t.Errorf("log file: %v, %v", fi, err)
			}
			for _, w := range []string{tt.head, "elided; the full text is in .outputs/", tt.tail + "[the saved output stops at 1.0 MiB", "[exit status 0]"} {
				if !strings.Contains(res.Content, w) {
					t.Errorf("output lacks %q:\n%s", w, res.Content)
				}
			}
			if !strings.HasPrefix(res.Content, tt.head) {
				t.Errorf("output does not start with the head:\n%.100s", res.Content)
			}
		})
	}
}

// The repair ladder's rule: a truncated command is never completed by
// guessing, so it never runs; lossless repairs apply to it as to any tool.
func TestTruncatedCommandNeverRuns(t *testing.T) {
	needSandbox(t)
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	rc := findTool(t, c, computer.RunCommandName)
	for _, args := range []string{
		`{"command":"rm -rf /tmp/x`,
		`{"command":"touch ran`,
		`{"command":"touch ran"`,
		`{"command":"touch ran",`,
		`{command:"touch ran", timeout_seconds: 1`,
	} {
		inv, err := tools.Prepare(rc, args, 0)
		if inv != nil || kindOf(err) != tool.InvalidArguments {
			t.Errorf("Prepare(%s) = %v, %v; want no invocation and invalid_arguments", args, inv, err)
			continue
		}
		if !strings.Contains(err.Error(), "cut off at byte") || !strings.Contains(err.Error(), "sent whole") {
			t.Errorf("Prepare(%s): the message does not say why: %v", args, err)
		}
	}
	if _, err := os.Stat(filepath.Join(h, "ran")); !os.IsNotExist(err) {
		t.Error("a truncated command ran")
	}
	// Fences around complete arguments are only packaging: that call runs.
	inv, err := tools.Prepare(rc, "```json\n{\"command\":\"touch ran\"}\n```", 0)
	if err != nil || !equalStrings(inv.Repairs, []string{schema.RungStripFences}) {
		t.Fatalf("fenced: %v, %v", inv, err)
	}
	inv, err = tools.Prepare(rc, `{command: 'touch ran',}`, 0)
	if err != nil || !equalStrings(inv.Repairs, []string{schema.RungTrailingCommas, schema.RungUnquotedKeys, schema.RungSingleQuotes}) {
		t.Fatalf("lossless repairs: %v, %v", inv, err)
	}
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// Without a sandbox run_command is not offered (the worker's start check
// failed), unless the operator asked for commands unconfined; the file
// tools are there either way.
func TestRunCommandNeedsASandbox(t *testing.T) {
	names := func(c *computer.Category) string {
		var n []string
		for _, tl := range c.Tools() {
			n = append(n, tl.Name())
		}
		return strings.Join(n, ",")
	}
	root := filepath.Join(t.TempDir(), "homes")
	off, err := computer.New(computer.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if got := names(off); got != "list_files,read_file,write_file,edit_file" {
		t.Errorf("without a sandbox: %s", got)
	}
	c := newCategory(t, computer.Config{Unconfined: true})
	if got := names(c); got != "list_files,read_file,write_file,edit_file,run_command" {
		t.Errorf("unconfined: %s", got)
	}
	if res, err := run(t, c, computer.RunCommandName, map[string]any{"command": "echo unconfined"}); err != nil || !strings.Contains(res.Content, "unconfined\n[exit status 0]") {
		t.Errorf("%q %v", res.Content, err)
	}
	if strings.Contains(findTool(t, c, computer.RunCommandName).Spec().Description, "sandbox") {
		t.Error("an unconfined run_command claims a sandbox")
	}
}

// A command no program could be given (a NUL byte; longer than Linux
// lets one argument be) is refused with what to do instead, and the
// longest that fits runs.
func TestRunCommandUnpassable(t *testing.T) {
	needSandbox(t)
	c := newCategory(t, computer.Config{})
	for _, tt := range []struct {
		args any
		want string
	}{
		{`{"command":"echo a\u0000b"}`, "NUL byte"},
		{map[string]any{"command": "echo " + strings.Repeat("x", 128<<10)}, "write_file"},
	} {
		_, err := run(t, c, computer.RunCommandName, tt.args)
		if kindOf(err) != tool.InvalidArguments || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.40v: %v, want invalid_arguments saying %q", tt.args, err, tt.want)
		}
	}
	cmd := "printf %s " + strings.Repeat("x", 128<<10-1-len("printf %s ")-len(" | wc -c")) + " | wc -c"
	res, err := run(t, c, computer.RunCommandName, map[string]any{"command": cmd})
	if err != nil || !strings.Contains(res.Content, strconv.Itoa(128<<10-1-len("printf %s ")-len(" | wc -c"))) {
		t.Errorf("the longest command: %.200q, %v", res.Content, err)
	}
}
