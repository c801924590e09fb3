package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/protocol"
)

// BuildWorker builds cmd/worker into dir and returns the binary's path.
// It runs the go command, so the working directory must be inside the
// module.
func BuildWorker(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "worker")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/agentbull/toolruntime/cmd/worker")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the worker: %v\n%s", err, out)
	}
	return bin, nil
}

// fleet runs the worker processes, one per slot. A process that exits
// unless the fleet ended it is counted and replaced.
type fleet struct {
	bin, url, dir string
	replicas      int
	log           *slog.Logger

	mu       sync.Mutex
	procs    []*proc
	gens     []int
	stopping bool
	exits    int // unexpected exits
	wg       sync.WaitGroup
}

// proc is one worker process: generation gen of its slot.
type proc struct {
	name     string
	cmd      *exec.Cmd
	markDir  string
	logPath  string
	done     chan struct{}
	intended bool // guarded by fleet.mu
}

func newFleet(bin, url, dir string, replicas, n int, log *slog.Logger) *fleet {
	return &fleet{bin: bin, url: url, dir: dir, replicas: replicas, log: log, procs: make([]*proc, n), gens: make([]int, n)}
}

// start starts the next generation of slot.
func (f *fleet) start(slot int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopping {
		return nil
	}
	gen := f.gens[slot]
	f.gens[slot]++
	name := fmt.Sprintf("w%d-%d", slot+1, gen)
	p := &proc{name: name, markDir: filepath.Join(f.dir, "marks", name), logPath: filepath.Join(f.dir, "logs", name+".log"), done: make(chan struct{})}
	if err := os.MkdirAll(p.markDir, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.logPath), 0o755); err != nil {
		return err
	}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(f.bin,
		"--nats-url", f.url, "--name", name, "--replicas", strconv.Itoa(f.replicas),
		"--diagnostics", "--mark-dir", p.markDir,
		"--ack-wait", workerAckWait.String(), "--max-deliver", strconv.Itoa(workerMaxDeliver),
		"--grace", workerGrace.String(), "--log-format", "json")
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting worker %s: %w", name, err)
	}
	f.procs[slot] = p
	f.wg.Go(func() {
		err := p.cmd.Wait()
		_ = logFile.Close()
		close(p.done)
		f.mu.Lock()
		unexpected := !p.intended && !f.stopping
		if unexpected {
			f.exits++
		}
		f.mu.Unlock()
		if unexpected {
			last, _ := readLines(p.logPath)
			f.log.Warn("worker process exited on its own; starting another", "worker", name, "err", err, "log", p.logPath,
				"last_lines", last[max(0, len(last)-3):])
			time.Sleep(time.Second)
			if err := f.start(slot); err != nil {
				f.log.Error("restarting a worker process", "slot", slot, "err", err)
			}
		}
	})
	return nil
}

// kill SIGKILLs the process in slot, waits for it to die, and starts the
// next generation.
func (f *fleet) kill(slot int) (string, error) {
	f.mu.Lock()
	p := f.procs[slot]
	if p != nil {
		p.intended = true
	}
	f.mu.Unlock()
	if p == nil {
		return "", fmt.Errorf("no worker process in slot %d", slot)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return p.name, err
	}
	<-p.done
	time.Sleep(300 * time.Millisecond)
	return p.name, f.start(slot)
}

// stop ends every process: SIGTERM, then SIGKILL after a grace period.
func (f *fleet) stop() {
	f.mu.Lock()
	f.stopping = true
	procs := append([]*proc(nil), f.procs...)
	f.mu.Unlock()
	for _, p := range procs {
		if p != nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-time.After(workerGrace + 10*time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	f.wg.Wait()
}

// lastLog returns the last lines of the log of each slot's newest
// process, for an error message.
func (f *fleet) lastLog(lines int) string {
	f.mu.Lock()
	procs := append([]*proc(nil), f.procs...)
	f.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		if p == nil {
			continue
		}
		all, _ := readLines(p.logPath)
		fmt.Fprintf(&b, "\n%s:", p.name)
		for _, l := range all[max(0, len(all)-lines):] {
			b.WriteString("\n  " + l)
		}
	}
	return b.String()
}

// unexpectedExits is the number of processes that exited on their own.
func (f *fleet) unexpectedExits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.exits
}

// marks reads the labels every process of the run appended, in any order.
func (f *fleet) marks() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(f.dir, "marks", "*", "marks.log"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range files {
		lines, err := readLines(name)
		if err != nil {
			return nil, err
		}
		out = append(out, lines...)
	}
	return out, nil
}

func readLines(name string) ([]string, error) {
	file, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var out []string
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		if sc.Text() != "" {
			out = append(out, sc.Text())
		}
	}
	return out, sc.Err()
}

// waitForInstances waits until n instances of the worker's micro service
// answer a ping.
func waitForInstances(ctx context.Context, nc *nats.Conn, n int) error {
	for {
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			return err
		}
		got := 0
		if err := nc.PublishRequest("$SRV.PING."+protocol.ServiceName, inbox, nil); err == nil {
			for {
				if _, err := sub.NextMsg(300 * time.Millisecond); err != nil {
					break
				}
				got++
			}
		}
		_ = sub.Unsubscribe()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d worker processes answer: %w", got, n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
