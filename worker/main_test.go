package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/turn"
)

func TestParseFlags(t *testing.T) {
	t.Setenv("WORKER_CALL_TIMEOUT", "7s")
	t.Setenv("NATS_URL", "nats://example.invalid:4222")
	m := newProgram(Config{})
	if err := m.ParseFlags([]string{"--concurrency", "3"}); err != nil {
		t.Fatal(err)
	}
	if m.Worker.CallTimeout != 7*time.Second || m.Worker.Concurrency != 3 || m.Conn.URL != "nats://example.invalid:4222" {
		t.Errorf("got timeout %s, concurrency %d, url %q", m.Worker.CallTimeout, m.Worker.Concurrency, m.Conn.URL)
	}
	// A flag beats the environment.
	m = newProgram(Config{})
	if err := m.ParseFlags([]string{"--call-timeout", "9s"}); err != nil || m.Worker.CallTimeout != 9*time.Second {
		t.Errorf("flag over env: %v, %s", err, m.Worker.CallTimeout)
	}
}

func TestParseFlagsRefusesBadSettings(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  [2]string
		want string
	}{
		{args: []string{"--storage", "tape"}, want: "--storage must be file or memory"},
		{args: []string{"--log-format", "xml"}, want: "--log-format must be text or json"},
		{args: []string{"--concurrency", "-1"}, want: "--concurrency must be more than 0, not -1"},
		{args: []string{"--call-timeout", "5"}, want: `--call-timeout must be a duration with its unit (300ms, 5s, 2m, 1h), not "5": use 5s`},
		{args: []string{"--listen", "nope"}, want: `--listen: "nope" is not host:port`},
		{args: []string{"--otlp-endpoint", "::bad url"}, want: "--otlp-endpoint: "},
		{env: [2]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"}, want: "OTEL_EXPORTER_OTLP_ENDPOINT: "},
		{args: []string{"--replicas", "7"}, want: "replicas must be 1 to 5"},
		{args: []string{"--duplicate-window", "10s"}, want: "shorter than the consumers' redelivery span"},
		{args: []string{"--tls-cert", "c.pem"}, want: "--tls-cert and --tls-key go together"},
		{args: []string{"--mark-dir", "/tmp"}, want: "--mark-dir needs --diagnostics"},
		{args: []string{"--pprof"}, want: "--pprof needs --http-addr"},
		{args: []string{"--gc-percent", "0"}, want: "--gc-percent must be at least 1"},
		{args: []string{"--concurrency", "0"}, want: "--concurrency must be more than 0"},
		{args: []string{"--task-concurrency", "0"}, want: "--task-concurrency must be more than 0"},
		{args: []string{"--max-parallel", "0"}, want: "--max-parallel must be more than 0"},
		{args: []string{"--ack-wait", "0s"}, want: "--ack-wait must be more than 0"},
		{args: []string{"--max-deliver", "0"}, want: "--max-deliver must be more than 0"},
		{args: []string{"--replicas", "0"}, want: "--replicas must be more than 0"},
		{env: [2]string{"WORKER_CONCURRENCY", "0"}, want: "--concurrency must be more than 0"},
		{args: []string{"--grace", "0s"}, want: "--grace must be more than 0"},
		{args: []string{"--repair-limit", "0"}, want: "--repair-limit must be more than 0"},
		{args: []string{"--media-budget", "0"}, want: "--media-budget must be more than 0"},
		{args: []string{"--state-ttl", "0s"}, want: "--state-ttl must be more than 0"},
		{args: []string{"--approval", "rm -rf"}, want: `--approval: "rm -rf" is neither none, destructive, all`},
		{args: []string{"--approval", "all,a.b.c"}, want: `--approval: "a.b.c" is neither`},
		{args: []string{"--approval-timeout", "26h"}, want: "approval timeout must be at least 1s and shorter than the state TTL 25h0m0s"},
		{args: []string{"--approval-timeout", "0s"}, want: "--approval-timeout must be more than 0"},
		{args: []string{"--concurency", "3"}, want: "flag provided but not defined: -concurency"},
		{args: []string{"--context", "nosuch"}, want: `no NATS context "nosuch"`},
		{args: []string{"--context", "../x"}, want: "is not a context name"},
		{args: []string{"stray"}, want: "unexpected arguments"},
		{env: [2]string{"WORKER_MAX_DELIVER", "many"}, want: "WORKER_MAX_DELIVER"},
	} {
		t.Run(strings.Join(c.args, " ")+c.env[0], func(t *testing.T) {
			t.Setenv("XDG_CONFIG_HOME", t.TempDir())
			if c.env[0] != "" {
				t.Setenv(c.env[0], c.env[1])
			}
			err := newProgram(Config{}).ParseFlags(c.args)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v %v: error %v, want it to mention %q", c.args, c.env, err, c.want)
			}
		})
	}
}

// writeContext saves a NATS CLI context as `nats context save` does, under
// a fresh XDG_CONFIG_HOME.
func writeContext(t *testing.T, name string, c map[string]any) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "nats", "context"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nats", "context", name+".json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// The connection settings come from the flags, then WORKER_* and the NATS
// CLI's variables, then the NATS context: the precedence of nats itself.
func TestConnectionSettingsPrecedence(t *testing.T) {
	for _, v := range []string{"NATS_URL", "NATS_CONTEXT", "NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_CREDS", "NATS_NKEY", "NATS_CERT", "NATS_KEY", "NATS_CA"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	writeContext(t, "prod", map[string]any{
		"url": "nats://ctx:4222", "user": "ctx-user", "password": "ctx-pass", "creds": "~/ctx.creds",
		"ca": "/ctx/ca.pem", "cert": "/ctx/cert.pem", "key": "/ctx/key.pem", "tls_first": true, "color_scheme": "dark",
	})
	home, _ := os.UserHomeDir()

	m := newProgram(Config{})
	if err := m.ParseFlags([]string{"--context", "prod"}); err != nil {
		t.Fatal(err)
	}
	if m.Conn.URL != "nats://ctx:4222" || m.Conn.User != "ctx-user" || m.Conn.Password != "ctx-pass" || m.Conn.TLSCA != "/ctx/ca.pem" ||
		m.Conn.TLSCert != "/ctx/cert.pem" || m.Conn.TLSKey != "/ctx/key.pem" || !m.Conn.TLSFirst || m.Conn.Creds != filepath.Join(home, "ctx.creds") {
		t.Errorf("from the context: %+v", m)
	}

	// NATS_CONTEXT names it too; the variables beat it, and a flag beats both.
	t.Setenv("NATS_CONTEXT", "prod")
	t.Setenv("NATS_URL", "nats://env:4222")
	t.Setenv("NATS_CA", "/env/ca.pem")
	t.Setenv("NATS_CREDS", "/env/user.creds")
	m = newProgram(Config{})
	if err := m.ParseFlags([]string{"--nats-url", "nats://flag:4222"}); err != nil {
		t.Fatal(err)
	}
	if m.Conn.URL != "nats://flag:4222" || m.Conn.TLSCA != "/env/ca.pem" || m.Conn.Creds != "/env/user.creds" || m.Conn.User != "ctx-user" {
		t.Errorf("flag > env > context: url %q ca %q creds %q user %q", m.Conn.URL, m.Conn.TLSCA, m.Conn.Creds, m.Conn.User)
	}
	// A connection error names where the URL came from: not the context.
	if src := m.Conn.URLSource(); !strings.Contains(src, "--nats-url or NATS_URL") {
		t.Errorf("the URL's source is said to be %q", src)
	}

	// As with nats, NATS_USER with no password is a token.
	os.Unsetenv("NATS_CONTEXT")
	t.Setenv("NATS_USER", "s3cret-token")
	m = newProgram(Config{})
	if err := m.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	if m.Conn.Token != "s3cret-token" || m.Conn.User != "" {
		t.Errorf("NATS_USER alone: token %q user %q, want it as the token", m.Conn.Token, m.Conn.User)
	}

	os.Unsetenv("NATS_USER")
	t.Setenv("NATS_TOKEN", "tok")
	if m = newProgram(Config{}); m.ParseFlags(nil) != nil || m.Conn.Token != "tok" {
		t.Errorf("NATS_TOKEN: token %q", m.Conn.Token)
	}

	// The OTel variables are the exporter's to read: never the flag's URL.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
	m = newProgram(Config{})
	if err := m.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	if m.OTLPEndpoint != "" || !m.otlpFromEnv {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: flag %q, from env %v", m.OTLPEndpoint, m.otlpFromEnv)
	}
}

// A context with settings the worker cannot honour is refused by name,
// not half used.
func TestContextUnsupported(t *testing.T) {
	writeContext(t, "ngs", map[string]any{"url": "tls://connect.ngs.global", "jetstream_domain": "hub"})
	err := newProgram(Config{}).ParseFlags([]string{"--context", "ngs"})
	if err == nil || !strings.Contains(err.Error(), "jetstream_domain") {
		t.Fatalf("error %v, want jetstream_domain refused", err)
	}
}

func TestHelpGoesToStdout(t *testing.T) {
	var out bytes.Buffer
	m := newProgram(Config{})
	m.helpOut = &out
	if err := m.ParseFlags([]string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"Usage: worker", "-context", "-nats-url", "NATS_CREDS", "(default 30s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	// The flag package makes a zero value of every flag's type to tell its
	// default from the zero value: a wrapper's String must survive that.
	if strings.Contains(out.String(), "panic") {
		t.Errorf("usage has a panic:\n%s", out.String())
	}
}

func TestNearLevel(t *testing.T) {
	for entry, want := range map[string]string{
		"destrutive": "destructive", "destructvie": "destructive", "DESTRUCTIVE": "destructive", "ALL": "all",
		"al": "all", "nnoe": "none", "non": "none", "allx": "all",
		"write_file": "", "ping": "", "destroy": "", "mcp_tool": "",
	} {
		if got := nearLevel(entry); got != want {
			t.Errorf("nearLevel(%q) = %q, want %q", entry, got, want)
		}
	}
}

// The fields of Main's Config are the defaults of their flags, which the
// command line still overrides.
func TestConfigIsMainsDefaults(t *testing.T) {
	cfg := Config{Name: "mine", Concurrency: 7, Grace: time.Minute, MemoryStorage: true}
	m := newProgram(cfg)
	if err := m.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	if w := m.Worker; w.Name != "mine" || w.Concurrency != 7 || w.Grace != time.Minute || m.Storage != "memory" || w.CallTimeout != turn.DefaultTimeout {
		t.Errorf("defaults from Config: name %q, concurrency %d, grace %s, storage %s, call timeout %s", w.Name, w.Concurrency, w.Grace, m.Storage, w.CallTimeout)
	}
	m = newProgram(cfg)
	if err := m.ParseFlags([]string{"--concurrency", "9", "--storage", "file"}); err != nil {
		t.Fatal(err)
	}
	if m.Worker.Concurrency != 9 || m.Storage != "file" {
		t.Errorf("flags over Config: concurrency %d, storage %s", m.Worker.Concurrency, m.Storage)
	}
}

// Every built-in category the flags leave off is named with the flag that
// turns it on.
func TestCategoriesOffSayTheirFlag(t *testing.T) {
	m := newProgram(Config{})
	if err := m.ParseFlags([]string{"--nats-url", "nats://127.0.0.1:1", "--todo=false", "--diagnostics", "--web-fetch"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range m.categoriesOff() {
		got = append(got, a.(slog.Attr).String())
	}
	want := "todo=--todo computer=--computer-root <dir> skills=--skills-dir <dir> mcp=--mcp-config <file>"
	if strings.Join(got, " ") != want {
		t.Errorf("off: %s\nwant %s", strings.Join(got, " "), want)
	}
}
