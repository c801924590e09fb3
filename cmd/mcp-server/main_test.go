package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func getenv(string) string { return "" }

// The dev principal is refused off loopback, and a door with no way to
// authenticate does not start.
func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--dev-principal", "dev", "--listen", "0.0.0.0:8471"}, "only on a loopback --listen"},
		{[]string{"--dev-principal", "dev", "--listen", "10.1.2.3:8471"}, "only on a loopback --listen"},
		{[]string{}, "give --principals FILE"},
		{[]string{"--jwt-issuer", "https://i.example"}, "--jwt-issuer needs --jwt-jwks and --principals"},
		{[]string{"--dev-principal", "dev", "--seal-key-file", "/nonexistent"}, "--seal-key-file"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), c.args, getenv, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

func TestLoopbackListen(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, "0.0.0.0:1": false, ":1": false, "example.com:1": false} {
		if got := loopbackListen(addr); got != want {
			t.Errorf("%s: %v", addr, got)
		}
	}
}
