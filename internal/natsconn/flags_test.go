package natsconn_test

import (
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/natsconn"
)

// env is a lookup over a map, as FromEnv and Resolve take one.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// resolve reads args and vars as the worker does: the flags, then
// FromEnv with the WORKER prefix, then Resolve.
func resolve(t *testing.T, args []string, vars map[string]string) (*natsconn.Flags, error) {
	t.Helper()
	var f natsconn.Flags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.Register(fs, "NATS URL")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if err := natsconn.FromEnv(fs, set, "WORKER", env(vars)); err != nil {
		return &f, err
	}
	return &f, f.Resolve(set, env(vars))
}

// TestRegister: the flags are the NATS CLI's, so that a command line
// written for `nats` works here.
func TestRegister(t *testing.T) {
	var f natsconn.Flags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	f.Register(fs, "where to connect")
	var names []string
	fs.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
	want := "context creds nats-url nkey password tls-ca tls-cert tls-key token user"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("flags %q, want %q", got, want)
	}
	if u := fs.Lookup("nats-url").Usage; u != "where to connect" {
		t.Errorf("--nats-url's usage %q", u)
	}
	args := []string{"--nats-url", "nats://a", "--context", "c", "--user", "u", "--password", "p", "--token", "t", "--nkey", "n",
		"--creds", "cr", "--tls-cert", "tc", "--tls-key", "tk", "--tls-ca", "ca"}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	wantF := natsconn.Flags{URL: "nats://a", Context: "c", Auth: natsconn.Auth{User: "u", Password: "p", Token: "t", NKey: "n",
		Creds: "cr", TLSCert: "tc", TLSKey: "tk", TLSCA: "ca"}}
	if f != wantF {
		t.Errorf("parsed %+v, want %+v", f, wantF)
	}
}

// TestFromEnv: a flag given wins; else the program's variable; else, for
// a connection flag, the NATS CLI's.
func TestFromEnv(t *testing.T) {
	f, err := resolve(t, []string{"--user", "flag-user"}, map[string]string{
		"WORKER_USER": "worker-user", "NATS_USER": "nats-user",
		"WORKER_PASSWORD": "worker-pw", "NATS_PASSWORD": "nats-pw",
		"NATS_URL": "nats://cli:4222", "NATS_CREDS": "/cli.creds",
		"WORKER_TLS_CA": "/worker-ca.pem", "NATS_CA": "/cli-ca.pem",
		"NATS_CERT": "/c.pem", "NATS_KEY": "/k.pem", "NATS_NKEY": "/n.nk", "NATS_TOKEN": "cli-token",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := natsconn.Flags{URL: "nats://cli:4222", Auth: natsconn.Auth{User: "flag-user", Password: "worker-pw", Token: "cli-token",
		NKey: "/n.nk", Creds: "/cli.creds", TLSCert: "/c.pem", TLSKey: "/k.pem", TLSCA: "/worker-ca.pem"}}
	if *f != want {
		t.Errorf("got %+v\nwant %+v", *f, want)
	}

	// A program's own flag reads only the program's variable; a value it
	// refuses is an error naming the variable.
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var conn natsconn.Flags
	conn.Register(fs, "")
	n := fs.Int("concurrency", 1, "")
	fs.Int("max-depth", 1, "")
	set := map[string]bool{}
	err = natsconn.FromEnv(fs, set, "WORKER", env(map[string]string{"WORKER_CONCURRENCY": "8", "WORKER_MAX_DEPTH": "deep", "NATS_CONCURRENCY": "9"}))
	if err == nil || err.Error() != `WORKER_MAX_DEPTH="deep": parse error` {
		t.Errorf("a bad WORKER_MAX_DEPTH: %v", err)
	}
	if *n != 8 || !set["concurrency"] || !set["max-depth"] || set["user"] {
		t.Errorf("concurrency %d, set %v", *n, set)
	}
}

// TestResolve covers the rules Resolve applies after the flags and
// variables are read: the CLI's user-without-password-is-a-token rule,
// and the context filling only what nothing else set.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	full := writeFile(t, dir, "full.json", `{"url":"nats://ctx:4222","user":"ctx-user","password":"ctx-pw","creds":"/ctx.creds",`+
		`"nkey":"/ctx.nk","cert":"/ctx-c.pem","key":"/ctx-k.pem","ca":"/ctx-ca.pem","tls_first":true}`)
	userOnly := writeFile(t, dir, "useronly.json", `{"url":"nats://ctx:4222","user":"ctx-secret"}`)
	noURL := writeFile(t, dir, "nourl.json", `{"token":"t"}`)
	for _, tc := range []struct {
		name      string
		args      []string
		vars      map[string]string
		want      natsconn.Flags
		urlSource string
	}{
		{name: "NATS_USER alone is a token",
			vars: map[string]string{"NATS_USER": "secret"},
			want: natsconn.Flags{Auth: natsconn.Auth{Token: "secret"}}},
		{name: "NATS_USER with NATS_PASSWORD is a user",
			vars: map[string]string{"NATS_USER": "u", "NATS_PASSWORD": "p"},
			want: natsconn.Flags{Auth: natsconn.Auth{User: "u", Password: "p"}}},
		{name: "--user alone stays a user (the program says it needs a password)",
			args: []string{"--user", "u"},
			want: natsconn.Flags{Auth: natsconn.Auth{User: "u"}}},
		{name: "the context fills everything",
			args: []string{"--context", full},
			want: natsconn.Flags{URL: "nats://ctx:4222", Context: full, ContextPath: full, URLFromContext: true,
				Auth: natsconn.Auth{User: "ctx-user", Password: "ctx-pw", Creds: "/ctx.creds", NKey: "/ctx.nk",
					TLSCert: "/ctx-c.pem", TLSKey: "/ctx-k.pem", TLSCA: "/ctx-ca.pem", TLSFirst: true}},
			urlSource: " (from NATS context " + full + ")"},
		{name: "NATS_CONTEXT names it too",
			vars: map[string]string{"NATS_CONTEXT": userOnly},
			want: natsconn.Flags{URL: "nats://ctx:4222", Context: userOnly, ContextPath: userOnly, URLFromContext: true,
				Auth: natsconn.Auth{Token: "ctx-secret"}},
			urlSource: " (from NATS context " + userOnly + ")"},
		{name: "flags and variables beat the context",
			args: []string{"--context", full, "--password", "flag-pw", "--creds", "/flag.creds"},
			vars: map[string]string{"NATS_URL": "nats://env:4222", "WORKER_TLS_CA": "/env-ca.pem"},
			want: natsconn.Flags{URL: "nats://env:4222", Context: full, ContextPath: full,
				Auth: natsconn.Auth{User: "ctx-user", Password: "flag-pw", Creds: "/flag.creds", NKey: "/ctx.nk",
					TLSCert: "/ctx-c.pem", TLSKey: "/ctx-k.pem", TLSCA: "/env-ca.pem", TLSFirst: true}},
			urlSource: " (--nats-url or NATS_URL, over NATS context " + full + ")"},
		{name: "a context's user without a password is a token",
			args: []string{"--context", userOnly},
			want: natsconn.Flags{URL: "nats://ctx:4222", Context: userOnly, ContextPath: userOnly, URLFromContext: true,
				Auth: natsconn.Auth{Token: "ctx-secret"}},
			urlSource: " (from NATS context " + userOnly + ")"},
		{name: "a context's user with a --password is a user",
			args: []string{"--context", userOnly, "--password", "pw"},
			want: natsconn.Flags{URL: "nats://ctx:4222", Context: userOnly, ContextPath: userOnly, URLFromContext: true,
				Auth: natsconn.Auth{User: "ctx-secret", Password: "pw"}},
			urlSource: " (from NATS context " + userOnly + ")"},
		{name: "a --user without a password over a context stays a user",
			args: []string{"--context", userOnly, "--user", "u"},
			want: natsconn.Flags{URL: "nats://ctx:4222", Context: userOnly, ContextPath: userOnly, URLFromContext: true,
				Auth: natsconn.Auth{User: "u"}},
			urlSource: " (from NATS context " + userOnly + ")"},
		{name: "a context with no url is fine when --nats-url gives one",
			args:      []string{"--context", noURL, "--nats-url", "nats://flag:4222"},
			want:      natsconn.Flags{URL: "nats://flag:4222", Context: noURL, ContextPath: noURL, Auth: natsconn.Auth{Token: "t"}},
			urlSource: " (--nats-url or NATS_URL, over NATS context " + noURL + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := resolve(t, tc.args, tc.vars)
			if err != nil {
				t.Fatal(err)
			}
			if *f != tc.want {
				t.Errorf("got  %+v\nwant %+v", *f, tc.want)
			}
			if got := f.URLSource(); got != tc.urlSource {
				t.Errorf("URLSource() = %q, want %q", got, tc.urlSource)
			}
		})
	}
}

// TestResolveErrors: a context that cannot be used stops the start with
// a message naming --context and the file.
func TestResolveErrors(t *testing.T) {
	dir := t.TempDir()
	noURL := writeFile(t, dir, "nourl.json", `{"token":"t"}`)
	bad := writeFile(t, dir, "bad.json", `{"url":`)
	domain := writeFile(t, dir, "domain.json", `{"url":"nats://a:4222","jetstream_domain":"hub"}`)
	t.Setenv("XDG_CONFIG_HOME", dir)
	for _, tc := range []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"no url", []string{"--context", noURL}, nil, "--context: NATS context " + noURL + " has no url"},
		{"not JSON", []string{"--context", bad}, nil, "--context: NATS context " + bad + ": unexpected end of JSON input"},
		{"unsupported", nil, map[string]string{"NATS_CONTEXT": domain},
			"--context: NATS context " + domain + " sets jetstream_domain, which is not supported"},
		{"missing", []string{"--context", "staging"}, nil, `--context: no NATS context "staging": ` +
			filepath.Join(dir, "nats", "context", "staging.json") + " does not exist (`nats context ls` lists them)"},
		{"not a name", []string{"--context", "a/b"}, nil, `--context: "a/b" is not a context name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolve(t, tc.args, tc.vars)
			if err == nil || err.Error() != tc.want {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}
