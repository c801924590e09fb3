package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	t.Setenv("WORKER_CALL_TIMEOUT", "7s")
	t.Setenv("NATS_URL", "nats://example.invalid:4222")
	m := NewMain()
	if err := m.ParseFlags([]string{"--concurrency", "3"}); err != nil {
		t.Fatal(err)
	}
	if m.Worker.CallTimeout != 7*time.Second || m.Worker.Concurrency != 3 || m.NATSURL != "nats://example.invalid:4222" {
		t.Errorf("got timeout %s, concurrency %d, url %q", m.Worker.CallTimeout, m.Worker.Concurrency, m.NATSURL)
	}
	// A flag beats the environment.
	m = NewMain()
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
		{args: []string{"--concurrency", "-1"}, want: "concurrency must be at least 1"},
		{args: []string{"--replicas", "7"}, want: "replicas must be 1 to 5"},
		{args: []string{"--duplicate-window", "10s"}, want: "shorter than the consumers' redelivery span"},
		{args: []string{"--tls-cert", "c.pem"}, want: "--tls-cert and --tls-key go together"},
		{args: []string{"--mark-dir", "/tmp"}, want: "--mark-dir needs --diagnostics"},
		{args: []string{"--pprof"}, want: "--pprof needs --http-addr"},
		{args: []string{"--gc-percent", "0"}, want: "--gc-percent must be at least 1"},
		{args: []string{"stray"}, want: "unexpected arguments"},
		{env: [2]string{"WORKER_MAX_DELIVER", "many"}, want: "WORKER_MAX_DELIVER"},
	} {
		if c.env[0] != "" {
			t.Setenv(c.env[0], c.env[1])
		}
		err := NewMain().ParseFlags(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: error %v, want it to mention %q", c.args, c.env, err, c.want)
		}
	}
}
