package natsconn_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/natsconn"
)

// writeFile writes data to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadContextByName reads a context by its name from the NATS CLI's
// directory: $XDG_CONFIG_HOME/nats/context, else ~/.config/nats/context.
func TestLoadContextByName(t *testing.T) {
	const file = `{"description":"the CLI writes more fields than are read","url":"nats://a:4222","token":"tok","user":"u","password":"p",` +
		`"creds":"/c.creds","nkey":"/n.seed","cert":"/c.pem","key":"/k.pem","ca":"/ca.pem","tls_first":true,"select_timeout":0}`
	want := natsconn.Context{URL: "nats://a:4222", Token: "tok", User: "u", Password: "p", Creds: "/c.creds", NKey: "/n.seed",
		Cert: "/c.pem", Key: "/k.pem", CA: "/ca.pem", TLSFirst: true}

	t.Run("XDG_CONFIG_HOME", func(t *testing.T) {
		xdg := t.TempDir()
		t.Setenv("XDG_CONFIG_HOME", xdg)
		t.Setenv("HOME", t.TempDir())
		path := writeFile(t, xdg, "nats/context/prod.json", file)
		c, got, err := natsconn.LoadContext("prod")
		if err != nil {
			t.Fatal(err)
		}
		if got != path || *c != want {
			t.Errorf("LoadContext(prod) = %+v from %s, want %+v from %s", *c, got, want, path)
		}
	})
	t.Run("HOME", func(t *testing.T) {
		home := t.TempDir()
		t.Setenv("XDG_CONFIG_HOME", "")
		t.Setenv("HOME", home)
		path := writeFile(t, home, ".config/nats/context/prod.json", file)
		c, got, err := natsconn.LoadContext("prod")
		if err != nil {
			t.Fatal(err)
		}
		if got != path || *c != want {
			t.Errorf("LoadContext(prod) = %+v from %s, want %+v from %s", *c, got, want, path)
		}
	})
	t.Run("a name ending in .json is still a name", func(t *testing.T) {
		xdg := t.TempDir()
		t.Setenv("XDG_CONFIG_HOME", xdg)
		path := writeFile(t, xdg, "nats/context/prod.json.json", `{"url":"nats://b:4222"}`)
		c, got, err := natsconn.LoadContext("prod.json")
		if err != nil {
			t.Fatal(err)
		}
		if got != path || c.URL != "nats://b:4222" {
			t.Errorf("LoadContext(prod.json) = %+v from %s, want nats://b:4222 from %s", *c, got, path)
		}
	})
}

// TestLoadContextByPath reads the .json file a path names, as the CLI
// accepts, and expands a leading ~/ in the files the context names.
func TestLoadContextByPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	path := writeFile(t, t.TempDir(), "elsewhere.json",
		`{"url":"tls://a:4222","creds":"~/n/u.creds","nkey":"~/n/u.nk","cert":"~/c.pem","key":"~/k.pem","ca":"/etc/ca.pem"}`)
	c, got, err := natsconn.LoadContext(path)
	if err != nil {
		t.Fatal(err)
	}
	want := natsconn.Context{URL: "tls://a:4222", Creds: filepath.Join(home, "n/u.creds"), NKey: filepath.Join(home, "n/u.nk"),
		Cert: filepath.Join(home, "c.pem"), Key: filepath.Join(home, "k.pem"), CA: "/etc/ca.pem"}
	if got != path || *c != want {
		t.Errorf("LoadContext(%s) = %+v from %s, want %+v", path, *c, got, want)
	}
}

// TestLoadContextErrors: each refusal says what is wrong and where.
func TestLoadContextErrors(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	ctxDir := filepath.Join(xdg, "nats", "context")
	bad := writeFile(t, ctxDir, "bad.json", `{"url": "nats://a:4222",`)
	wrongType := writeFile(t, ctxDir, "wrongtype.json", `{"url": 4222}`)
	unsupported := writeFile(t, ctxDir, "jwt.json", `{"url":"nats://a:4222","inbox_prefix":"_I","nsc":"nsc://o/a/u","user_jwt":"eyJ"}`)
	if err := os.Mkdir(filepath.Join(ctxDir, "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, arg string
		want      []string
	}{
		{"empty name", "", []string{`"" is not a context name`}},
		{"dot", ".", []string{`"." is not a context name`}},
		{"dot dot", "..", []string{`".." is not a context name`}},
		{"a path that is not a .json file", "ctx/prod", []string{`"ctx/prod" is not a context name`}},
		{"backslash", `a\b`, []string{`"a\\b" is not a context name`}},
		{"missing name", "nope", []string{`no NATS context "nope"`, filepath.Join(ctxDir, "nope.json") + " does not exist", "nats context ls"}},
		{"missing path", filepath.Join(xdg, "gone.json"), []string{"no NATS context", filepath.Join(xdg, "gone.json") + " does not exist"}},
		{"not JSON", "bad", []string{"NATS context " + bad, "unexpected end of JSON input"}},
		{"a field of the wrong type", "wrongtype", []string{"NATS context " + wrongType, "cannot unmarshal number", "url"}},
		{"fields that cannot be honoured", "jwt", []string{"NATS context " + unsupported + " sets nsc, user_jwt, inbox_prefix, which is not supported"}},
		{"a directory", "dir", []string{filepath.Join(ctxDir, "dir.json"), "is a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := natsconn.LoadContext(tc.arg)
			if err == nil {
				t.Fatalf("LoadContext(%q) = %+v, want an error", tc.arg, *c)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("LoadContext(%q): %v\nwant it to say %q", tc.arg, err, w)
				}
			}
		})
	}
	// Each field that cannot be honoured is refused on its own too.
	for _, key := range []string{"nsc", "user_jwt", "socks_proxy", "jetstream_domain", "jetstream_api_prefix", "inbox_prefix"} {
		path := writeFile(t, ctxDir, key+"-only.json", `{"url":"nats://a:4222","`+key+`":"x"}`)
		_, _, err := natsconn.LoadContext(path)
		if want := "NATS context " + path + " sets " + key + ", which is not supported"; err == nil || err.Error() != want {
			t.Errorf("a context setting %s: %v, want %q", key, err, want)
		}
	}
}
