package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/natstest"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// The console started without a token prints its URL with a generated
// one, warns when bound beyond loopback without TLS, refuses a request
// without a session, and stops on its context.
func TestConsoleCommand(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr syncBuf
	rc := make(chan int, 1)
	env := func(string) string { return "" }
	go func() {
		rc <- run(ctx, []string{"--nats-url", srv.ClientURL(), "--listen", "0.0.0.0:0"}, env, pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no URL printed: %v; stderr: %s", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	u, ok := strings.CutPrefix(strings.TrimSpace(line), "Console at ")
	if !ok || !strings.Contains(u, "/login?token=") || !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("printed %q", line)
	}
	if !strings.Contains(stderr.String(), "WITHOUT TLS") {
		t.Errorf("no warning for 0.0.0.0 without TLS: %s", stderr.String())
	}
	base := u[:strings.Index(u, "/login")]
	for path, want := range map[string]int{"/login": 200, "/approvals": 401, "/static/console.js": 200} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	cancel()
	select {
	case code := <-rc:
		if code != 0 {
			t.Errorf("exit %d; stderr: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the console did not stop")
	}
}

func TestConsoleFlagErrors(t *testing.T) {
	t.Parallel()
	env := func(k string) string {
		if k == "CONSOLE_TOKEN" {
			return "short"
		}
		return ""
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert-file", "x.pem"}, "go together"},
		{[]string{"--nats-url", "nats://127.0.0.1:1"}, "at least 16 characters"},
		{[]string{"--context", "no-such-context-here"}, "no NATS context"},
	} {
		var out, errb syncBuf
		if code := run(context.Background(), c.args, env, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}
