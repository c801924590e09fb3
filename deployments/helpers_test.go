package deployments_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// passwords are the users' passwords of one test, as the NATS
// configurations read them from the environment.
type passwords struct {
	admin, gateway, worker, runner, sys string
}

// setPasswords puts fresh passwords in the environment the NATS
// configurations read them from (ADMIN_PASSWORD, …). It uses t.Setenv, so
// its test cannot be parallel: parallel tests take sharedPasswords.
func setPasswords(t *testing.T) passwords {
	t.Helper()
	p := freshPasswords()
	for key, value := range p.env() {
		t.Setenv(key, value)
	}
	return p
}

func freshPasswords() passwords {
	return passwords{admin: newPassword(), gateway: newPassword(), worker: newPassword(), runner: newPassword(), sys: newPassword()}
}

func (p passwords) env() map[string]string {
	return map[string]string{"ADMIN_PASSWORD": p.admin, "GATEWAY_PASSWORD": p.gateway,
		"WORKER_PASSWORD": p.worker, "RUNNER_PASSWORD": p.runner, "SYS_PASSWORD": p.sys}
}

// shared are the passwords TestMain puts in the environment for the
// whole run, so that tests that start servers from the configurations
// can be parallel (t.Setenv refuses a parallel test). A sequential test
// that sets its own (setPasswords) restores them when it ends, before
// any parallel test goes on.
var shared = freshPasswords()

// sharedPasswords are the run's passwords, for a parallel test.
func sharedPasswords() passwords { return shared }

func TestMain(m *testing.M) {
	for key, value := range shared.env() {
		if err := os.Setenv(key, value); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// newPassword is a password of the form the README recommends: a letter,
// then hex digits.
func newPassword() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "p" + hex.EncodeToString(b)
}

// serverLog keeps what a server logs, to show it when a test fails.
type serverLog struct {
	mu    sync.Mutex
	name  string
	lines []string
}

func (l *serverLog) add(level, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("[%s] %s %s", l.name, level, fmt.Sprintf(format, v...)))
}

func (l *serverLog) Noticef(format string, v ...any) { l.add("INF", format, v...) }
func (l *serverLog) Warnf(format string, v ...any)   { l.add("WRN", format, v...) }
func (l *serverLog) Fatalf(format string, v ...any)  { l.add("FTL", format, v...) }
func (l *serverLog) Errorf(format string, v ...any)  { l.add("ERR", format, v...) }
func (l *serverLog) Debugf(format string, v ...any)  { l.add("DBG", format, v...) }
func (l *serverLog) Tracef(format string, v ...any)  { l.add("TRC", format, v...) }

// matching returns the logged lines that contain s.
func (l *serverLog) matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

func (l *serverLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// loadConfig reads a NATS configuration of this directory with the real
// server parser and moves everything that listens to 127.0.0.1 on free
// ports, with a fresh store directory.
func loadConfig(t *testing.T, path string) *server.Options {
	t.Helper()
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.HTTPHost, opts.HTTPPort = "127.0.0.1", -1
	opts.StoreDir = t.TempDir()
	opts.NoSigs = true
	return opts
}

// startServer starts a server with opts; it is shut down when the test
// ends, and its log is shown if the test failed.
func startServer(t *testing.T, opts *server.Options) (*server.Server, *serverLog) {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats server %s: %v", opts.ServerName, err)
	}
	log := &serverLog{name: opts.ServerName}
	s.SetLogger(log, false, false)
	go s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		t.Fatalf("nats server %s did not become ready:\n%s", opts.ServerName, log)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
		if t.Failed() && os.Getenv("DEPLOYMENTS_TEST_SERVER_LOG") != "" {
			t.Logf("server log:\n%s", log)
		}
	})
	return s, log
}

// asyncErrors collects a connection's asynchronous errors: the server
// reports a permissions violation that way.
type asyncErrors struct {
	mu   sync.Mutex
	errs []error
}

func (a *asyncErrors) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs = append(a.errs, err)
}

func (a *asyncErrors) all() []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]error(nil), a.errs...)
}

// waitFor waits for an error whose text contains every part, ignoring
// case.
func (a *asyncErrors) waitFor(parts ...string) error {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
	next:
		for _, err := range a.all() {
			for _, p := range parts {
				if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(p)) {
					continue next
				}
			}
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// client is a connection of one user.
type client struct {
	user string
	nc   *nats.Conn
	js   jetstream.JetStream
	errs *asyncErrors
}

// connect connects as user to urls (comma-separated); the connection is
// closed when the test ends.
func connect(t *testing.T, urls, user, password string) *client {
	t.Helper()
	c := &client{user: user, errs: &asyncErrors{}}
	var err error
	c.nc, err = nats.Connect(urls, nats.UserInfo(user, password), nats.Name("deployments test "+user),
		nats.ErrorHandler(c.errs.handler), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connecting as %s: %v", user, err)
	}
	t.Cleanup(c.nc.Close)
	if c.js, err = jetstream.New(c.nc); err != nil {
		t.Fatal(err)
	}
	return c
}

// noErrors fails the test if the connection had any asynchronous error.
func (c *client) noErrors(t *testing.T) {
	t.Helper()
	for _, err := range c.errs.all() {
		t.Errorf("%s: unexpected asynchronous error: %v", c.user, err)
	}
}

// freePorts returns n ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

func routeURL(port int) *url.URL {
	return &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", port)}
}

// testLogger discards the worker's logs unless DEPLOYMENTS_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("DEPLOYMENTS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// readFile reads a file of this directory.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
