package worker

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/tool"
)

// mainCtxEnv makes the test binary a program whose main is Main, with a
// context that ends when its stdin closes.
const mainCtxEnv = "WORKER_TEST_MAIN_CTX"

func mainUntilStdinCloses() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	os.Args = append(os.Args[:1], strings.Fields(os.Getenv(mainCtxEnv))...)
	Main(ctx, Config{Version: "2.0.0"}, tool.NewCategory("loud", shout))
}

// The end of Main's context is a stop like a signal's: announced, then a
// clean stop and exit code 0.
func TestMainStopsWithItsContext(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs Main in a process")
	}
	s := natstest.Start(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainCtxEnv+"=--nats-url "+s.ClientURL()+" --storage memory --name ctx-worker")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 10000)
	var log strings.Builder // read once lines is closed
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLine := func(want string) {
		t.Helper()
		for l := range lines {
			if strings.Contains(l, want) {
				return
			}
		}
		t.Fatalf("no %q before the worker's stderr closed", want)
	}
	waitLine("categories=todo,brain,schedules,background_jobs,workflows,loud")
	workertest.WaitForService(t, s.Connect(t))
	stdin.Close()
	waitLine("stopping: waiting up to 30s for 0 running calls to finish")
	waitLine("worker stopped")
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			for range lines {
			}
			t.Errorf("exit: %v\n%s", err, log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Main did not return")
	}
}
