package computer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/agentbull/toolruntime/internal/sandbox"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/tool"
)

// Directories in the home the worker uses itself.
const (
	outputsDir = ".outputs"
	tmpDir     = ".tmp"
)

// waitDelay is how long a command's output may stay open after its shell
// ended or was killed: a process that left the process group (setsid)
// can hold the pipe, and the call must still end.
const waitDelay = 500 * time.Millisecond

// commandMargin is added to the longest command time limit to make the
// tool's own limit: the command's timer fires first and reports what the
// command printed.
const commandMargin = 15 * time.Second

// maxCommandBytes is the longest command: the shell gets it as one
// argument, which Linux bounds to 128 KiB with its NUL (MAX_ARG_STRLEN).
const maxCommandBytes = 128<<10 - 1

// maxDetailCommand bounds the command quoted in the details.
const maxDetailCommand = 4 << 10

var errCommandTimeout = errors.New("the command's time limit passed")

// CommandParams are run_command's parameters.
type CommandParams struct {
	Command        string `json:"command" jsonschema:"description=The shell command line (POSIX sh) to run in your home directory.,minLength=1"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"description=Time limit in seconds (default and maximum are set by the worker).,minimum=1,maximum=86400"`
}

func (c *Category) runCommand() *tool.Tool {
	return tool.Must(tool.Def[CommandParams]{
		Spec: tool.Spec{Name: RunCommandName, Destructive: true, Timeout: c.cfg.MaxCommandTimeout + commandMargin,
			Description: c.commandDescription()},
		Activity: func(p CommandParams) string { return "Running " + commandLabel(p.Command) },
		CompletedActivity: func(p CommandParams, r tool.Result) string {
			d, ok := r.Details.(*CommandDetails)
			switch {
			case !ok:
				return "Ran " + commandLabel(p.Command)
			case d.TimedOut:
				return "Ran " + commandLabel(p.Command) + " (timed out)"
			case d.Signal != "":
				return "Ran " + commandLabel(p.Command) + " (" + d.Signal + ")"
			}
			return fmt.Sprintf("Ran %s (exit %d)", commandLabel(p.Command), d.ExitCode)
		},
		Execute: c.run,
	})
}

func (c *Category) commandDescription() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run a shell command (sh -c) in your home directory and get its combined output and exit status. "+
		"The environment holds only %s; stdin is empty. "+
		"Time limit %s by default, at most %s; the command and every process it started are killed when it ends, times out or is aborted, "+
		"so nothing keeps running in the background. Output over %s keeps its head and tail; the full output is saved in %s/ in your home.",
		envNames(c.cfg.Env, c.cfg.Sandbox != nil && c.cfg.Sandbox.Network()), duration(c.cfg.CommandTimeout), duration(c.cfg.MaxCommandTimeout), textclip.ByteCount(int64(c.cfg.OutputBudget)), outputsDir)
	if s := c.cfg.Sandbox; s != nil {
		l := s.Limits()
		fmt.Fprintf(&b, " It runs in a sandbox: your home and a private /tmp (%s) are the only writable places, the system is read-only, other processes are invisible; ", textclip.ByteCount(l.TmpBytes))
		if s.Network() {
			b.WriteString("the network is reached only through an HTTP(S) proxy (set in the environment) to public internet addresses. ")
		} else {
			b.WriteString("there is no network. ")
		}
		b.WriteString("Limits: ")
		if s.Cgroups() {
			fmt.Fprintf(&b, "%s of memory in all (its processes, /tmp and /dev/shm together), %g CPU cores; ", textclip.ByteCount(l.Memory), l.CPU)
		}
		fmt.Fprintf(&b, "at most %d processes; each process at most %s of memory (address space), %d s of CPU and files of %s; the output says when a limit stopped it.",
			l.Processes, textclip.ByteCount(l.MemoryBytes), l.CPUSeconds, textclip.ByteCount(l.FileBytes))
	}
	return b.String()
}

// envNames lists the variables a command's environment holds.
func envNames(extra []string, proxy bool) string {
	names := []string{"PATH", "HOME", "LANG", "TMPDIR"}
	if proxy {
		names = append(names, "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY (and their lower-case forms)")
	}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// duration writes d for people: "90 s", "2 min", "1 h".
func duration(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return d.String()
}

// commandLabel is the first line of a command, cut short, in backquotes.
func commandLabel(cmd string) string {
	first, _, more := strings.Cut(strings.TrimSpace(cmd), "\n")
	first = textclip.Runes(first, 60)
	if more {
		first += " …"
	}
	return "`" + first + "`"
}

// CommandDetails are run_command's details.
type CommandDetails struct {
	Command    string `json:"command"`
	ExitCode   int    `json:"exit_code"`
	Signal     string `json:"signal,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	Aborted    bool   `json:"aborted,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	// OutputBytes counts all the output, kept or not.
	OutputBytes int64 `json:"output_bytes"`
	// Truncated: the model saw the head and the tail only.
	Truncated bool `json:"truncated"`
	// LogPath is the file in the home with the full output, relative to
	// the home; empty when it could not be written.
	LogPath      string `json:"log_path,omitempty"`
	LogBytes     int64  `json:"log_bytes"`
	LogTruncated bool   `json:"log_truncated,omitempty"`
	LogError     string `json:"log_error,omitempty"`
	// OverQuota: the home is over its disk quota after the command (it
	// was stopped for it when the result is an error).
	OverQuota bool `json:"over_quota,omitempty"`
	// KilledLeftovers: processes the command left running were killed
	// when it ended.
	KilledLeftovers bool `json:"killed_leftovers,omitempty"`
	// PipeHeld: a process that left the process group held the output
	// open after the command ended; it may still be running.
	PipeHeld bool `json:"pipe_held,omitempty"`
}

func (c *Category) run(ctx context.Context, p CommandParams) (tool.Result, error) {
	switch {
	case strings.TrimSpace(p.Command) == "":
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "The command is empty.")
	case strings.IndexByte(p.Command, 0) >= 0:
		// No program can be given a NUL byte in an argument.
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "The command contains a NUL byte, which a shell command line cannot hold; write such bytes with printf '\\000'.")
	case len(p.Command) > maxCommandBytes:
		return tool.Result{}, tool.Errorf(tool.InvalidArguments,
			"The command is %s, over the %s the system lets a command line be. Put long content in a file with write_file and run a short command on it (e.g. sh script.sh).",
			textclip.ByteCount(int64(len(p.Command))), textclip.ByteCount(maxCommandBytes))
	}
	h, call, err := c.homeOf(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	defer h.close()

	limit := c.cfg.CommandTimeout
	var notes []string
	if p.TimeoutSeconds > 0 {
		limit = time.Duration(p.TimeoutSeconds) * time.Second
		if limit > c.cfg.MaxCommandTimeout {
			notes = append(notes, fmt.Sprintf("[the time limit was lowered from %d s to the worker's maximum of %s]", p.TimeoutSeconds, duration(c.cfg.MaxCommandTimeout)))
			limit = c.cfg.MaxCommandTimeout
		}
	}

	if err := h.workDir(tmpDir); err != nil {
		return tool.Result{}, fileError("create", tmpDir, err)
	}
	half := (c.cfg.OutputBudget - noteReserve) / 2
	logMax := c.cfg.MaxLogBytes
	room := h.quota.room(h)
	if room >= 0 {
		logMax = min(logMax, room) // the log is in the home: it counts
	}
	d := &CommandDetails{Command: textclip.Head(p.Command, maxDetailCommand)}
	logRel := filepath.Join(outputsDir, logName(call))
	// The log is made at the command's first byte of output: a command
	// that prints nothing leaves no file (a file per quiet command would
	// grow .outputs, which every command's quota walks read, without end).
	out := &capture{headMax: half, tailMax: half, logMax: logMax, progress: outputProgress(ctx),
		openLog: func() (io.WriteCloser, error) { return openLog(h, logRel) }}
	if h.quota.full(h) {
		// A home at or over its bound may not grow by the command's
		// log either: the follower would count the log as the command's
		// growth and stop an rm that prints. The model still gets the
		// head and the tail.
		out.openLog = nil
	}
	defer out.closeLog()

	quotaCtx, stopQuota := context.WithCancelCause(ctx)
	defer stopQuota(nil)
	cmdCtx, cancel := context.WithTimeoutCause(quotaCtx, limit, errCommandTimeout)
	defer cancel()
	follower := h.quota.follow(h)
	defer follower.close()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		follower.run(cmdCtx, stopQuota)
	}()
	start := time.Now()
	var st commandStatus
	if c.cfg.Sandbox != nil {
		st, err = c.runSandboxed(cmdCtx, h, p.Command, out, room, follower)
	} else {
		st, err = c.runUnconfined(cmdCtx, h, p.Command, out)
	}
	overQuota := errors.Is(context.Cause(cmdCtx), errOverQuota)
	cancel()
	<-watched
	if err != nil {
		return tool.Result{Details: d}, err
	}
	d.DurationMS = time.Since(start).Milliseconds()
	var quotaNote string
	if h.quota != nil {
		if u, over := h.quota.recount(h); over || overQuota {
			d.OverQuota = true
			quotaNote = "your home is over its disk quota: " + h.quota.describe(u)
		}
	}

	switch {
	case ctx.Err() != nil:
		d.Aborted = true
	case overQuota:
		d.OverQuota = true
	case context.Cause(cmdCtx) == errCommandTimeout:
		d.TimedOut = true
	}
	stopped := d.TimedOut || d.Aborted || overQuota
	d.KilledLeftovers = st.leftovers && !stopped
	d.PipeHeld = st.pipeHeld && !st.leftovers && !stopped
	d.ExitCode, d.Signal = st.code, st.signal
	if !stopped {
		notes = append(notes, st.notes...)
	}

	if out.hasLog() {
		d.LogPath = logRel
	}
	text, truncated := out.text(d.LogPath)
	d.Truncated = truncated
	d.OutputBytes = out.total
	d.LogBytes, d.LogTruncated = out.logged, out.logCut
	if out.logFailed != nil {
		d.LogError = out.logFailed.Error()
	}

	var b strings.Builder
	if text == "" {
		b.WriteString("(no output)\n")
	} else {
		b.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteByte('\n')
		}
	}
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	if d.LogTruncated {
		fmt.Fprintf(&b, "[the saved output stops at %s; the rest was counted, not kept]\n", textclip.ByteCount(d.LogBytes))
	}
	if d.KilledLeftovers {
		b.WriteString("[processes the command left running in the background were killed]\n")
	}
	if d.PipeHeld {
		b.WriteString("[a process that left the command's process group kept its output open; it may still be running]\n")
	}
	switch {
	case overQuota && !d.Aborted:
		fmt.Fprintf(&b, "[stopped: %s; the command and every process it started were killed]", quotaNote)
		return tool.Result{Content: b.String(), Details: d},
			tool.Errorf(tool.ToolError, "The command was stopped because your home went over its disk quota (%s); it and every process it started were killed, and file writes are refused until you delete files (run_command `rm`, which runs while over quota as long as it frees space). Its output so far follows.", strings.TrimPrefix(quotaNote, "your home is over its disk quota: "))
	case quotaNote != "" && !d.Aborted && !d.TimedOut:
		b.WriteString("[" + quotaNote + "; file writes are refused until you delete files]\n")
	}
	switch {
	case d.Aborted:
		b.WriteString("[aborted; the command and every process it started were killed]")
		return tool.Result{Content: b.String(), Details: d},
			tool.Errorf(tool.Aborted, "The command was aborted (%v); it and every process it started were killed.", context.Cause(ctx))
	case d.TimedOut:
		fmt.Fprintf(&b, "[timed out after %s; the command and every process it started were killed]", duration(limit))
		return tool.Result{Content: b.String(), Details: d},
			tool.Errorf(tool.Timeout, "The command did not finish within %s and was killed, with every process it started. Its output so far follows.", duration(limit))
	case d.Signal != "" && d.ExitCode > 0:
		// The sandbox reports a signal as 128+n, as shells do.
		fmt.Fprintf(&b, "[killed by signal %s (exit status %d)]", d.Signal, d.ExitCode)
	case d.Signal != "":
		fmt.Fprintf(&b, "[killed by signal %s]", d.Signal)
	default:
		fmt.Fprintf(&b, "[exit status %d]", d.ExitCode)
	}
	return tool.Result{Content: b.String(), Details: d}, nil
}

// commandStatus is how a command ended.
type commandStatus struct {
	code      int
	signal    string
	leftovers bool     // processes it left were killed
	pipeHeld  bool     // unconfined only: a process outside the group held the output
	notes     []string // the limits that stopped it
}

// runSandboxed runs command in a sandbox of its own, the home its only
// writable place besides a private /tmp. When the sandbox ends (the
// shell exits, the time limit passes, the call is aborted, the worker
// dies) the kernel kills everything in it.
//
// room is what the home's disk quota has left (-1: no quota): no file
// the command writes may grow beyond it (RLIMIT_FSIZE, rounded down to
// whole blocks, at least one), so that one writer cannot pass the quota
// by more than its other files hold.
func (c *Category) runSandboxed(ctx context.Context, h *home, command string, out *capture, room int64, f *follower) (commandStatus, error) {
	w := &sandbox.Watch{W: out}
	spec := sandbox.Spec{Home: h.dir, Shell: c.cfg.Shell, Command: command, Env: c.env(h)}
	if room >= 0 {
		spec.FileBytes = max(room&^(quotaBlock-1), quotaBlock)
		spec.FileWhy = "the room left in your home's disk quota when the command started"
	}
	// The follower holds the command from before its first instruction:
	// a home already past its bound is stopped before it can grow.
	var tree *procTree
	spec.Ready = func(r *sandbox.Run) {
		if pid := r.Tree(); pid > 0 && f != nil {
			// No cgroup of its own: its processes are held from userland.
			tree = newProcTree(pid)
			f.setTree(tree)
		} else {
			f.setPacer(r.Throttle)
		}
	}
	r, err := c.cfg.Sandbox.Start(ctx, spec, w, waitDelay)
	if tree != nil {
		defer tree.close()
	}
	if err != nil {
		return commandStatus{}, fmt.Errorf("the command's sandbox could not be started: %w", err)
	}
	waitErr := r.Wait()
	end, endErr := r.End()
	if endErr != nil {
		c.cfg.Logger.Error("run_command: the command's cgroup was not removed", "err", endErr)
	}
	st := commandStatus{leftovers: end.Leftovers}
	code, sig, ok := r.Status()
	if !ok {
		return st, fmt.Errorf("waiting for the command failed: %w", waitErr)
	}
	st.code = code
	if sig != 0 {
		st.signal = sig.String()
	}
	st.notes = c.cfg.Sandbox.Notes(sig, w, end)
	return st, nil
}

// runUnconfined runs command as a process of the worker's own user, in a
// process group of its own (--command-sandbox none).
func (c *Category) runUnconfined(ctx context.Context, h *home, command string, out *capture) (commandStatus, error) {
	cmd := exec.CommandContext(ctx, c.cfg.Shell, "-c", command)
	cmd.Dir = h.dir
	cmd.Env = c.env(h)
	cmd.Stdout, cmd.Stderr = out, out // one pipe: output interleaved as a terminal shows it
	// A group of its own, so that one kill reaches everything the command
	// started; and the shell dies with the worker should the worker die
	// without killing it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		_, err := killGroup(cmd.Process.Pid)
		return err
	}
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return commandStatus{}, fmt.Errorf("the command could not be started: %w", err)
	}
	waitErr := cmd.Wait()
	// Whatever the command left running in its group goes with it.
	leftovers, _ := killGroup(cmd.Process.Pid)
	st := commandStatus{leftovers: leftovers, pipeHeld: errors.Is(waitErr, exec.ErrWaitDelay)}
	if cmd.ProcessState == nil {
		return st, fmt.Errorf("waiting for the command failed: %w", waitErr)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.signal = ws.Signal().String()
		st.code = -1
	} else {
		st.code = cmd.ProcessState.ExitCode()
	}
	return st, nil
}

// env is a command's whole environment: nothing of the worker's own.
func (c *Category) env(h *home) []string {
	env := []string{
		"PATH=" + c.cfg.Path,
		"HOME=" + h.dir,
		"LANG=" + c.cfg.Lang,
		"TMPDIR=" + filepath.Join(h.dir, tmpDir),
	}
	return append(env, c.cfg.Env...)
}

// killGroup kills the process group led by pid and reports whether it
// still had members. A group that is already gone is not an error.
func killGroup(pid int) (bool, error) {
	if pid <= 0 {
		return false, nil
	}
	switch err := syscall.Kill(-pid, syscall.SIGKILL); {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.ESRCH):
		return false, nil
	default:
		return false, err
	}
}

// openLog creates (or truncates) the file that keeps a command's full
// output, through the home's root like every other path, and refuses a
// FIFO or a hard link planted under the predictable name.
func openLog(h *home, rel string) (*os.File, error) {
	if err := h.workDir(filepath.Dir(rel)); err != nil {
		return nil, err
	}
	f, _, err := h.openFile("write", rel, rel, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

var plainToken = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)

// logName names a call's output file: <turn_id>.<step>.<call_id>.log,
// the call id replaced by a digest when it is not a plain file name. The
// step is in the name because call ids are only unique within a model
// response: providers number them per response, and step 1's call_1 must
// not overwrite step 0's log.
func logName(c tool.Call) string {
	id := c.CallID
	if !plainToken.MatchString(id) {
		sum := sha256.Sum256([]byte(id))
		id = "call-" + hex.EncodeToString(sum[:12])
	}
	turn := c.TurnID
	if !plainToken.MatchString(turn) {
		turn = "turn"
	}
	return fmt.Sprintf("%s.%d.%s.log", turn, c.Step, id)
}
