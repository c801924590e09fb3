package natsconn

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
)

// Context is the part of a NATS CLI context (`nats context save`) the
// worker and the console use: ADR-21 documents the file, ~/.config/nats/context/<name>.json.
// It is read here rather than with jsm.go's natscontext, which would bring
// the JetStream management library and nats-server's certificate store
// into the programs for a dozen JSON fields.
type Context struct {
	URL      string `json:"url"`
	Token    string `json:"token"`
	User     string `json:"user"`
	Password string `json:"password"`
	Creds    string `json:"creds"`
	NKey     string `json:"nkey"`
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	CA       string `json:"ca"`
	TLSFirst bool   `json:"tls_first"`
	// What cannot be honoured here: a context that sets any of these is
	// refused rather than half used.
	NSC         string `json:"nsc"`
	UserJWT     string `json:"user_jwt"`
	SocksProxy  string `json:"socks_proxy"`
	JSDomain    string `json:"jetstream_domain"`
	JSAPIPrefix string `json:"jetstream_api_prefix"`
	InboxPrefix string `json:"inbox_prefix"`
}

// natsConfigDir is where the NATS CLI keeps its configuration:
// $XDG_CONFIG_HOME/nats, else ~/.config/nats.
func natsConfigDir() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "nats"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".config", "nats"), nil
}

// LoadContext reads the context name (a name in the CLI's context
// directory, or the path of a .json file, as the CLI accepts) and returns
// it with the file it came from.
func LoadContext(name string) (*Context, string, error) {
	path := name
	if !strings.HasSuffix(name, ".json") || !strings.ContainsRune(name, os.PathSeparator) {
		if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
			return nil, "", fmt.Errorf("%q is not a context name", name)
		}
		dir, err := natsConfigDir()
		if err != nil {
			return nil, "", fmt.Errorf("finding the NATS CLI contexts: %w", err)
		}
		path = filepath.Join(dir, "context", name+".json")
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, path, fmt.Errorf("no NATS context %q: %s does not exist (`nats context ls` lists them)", name, path)
	}
	if err != nil {
		return nil, path, err
	}
	c, err := parseContext(path, data)
	if err != nil {
		return nil, path, err
	}
	return c, path, nil
}

// parseContext reads a context file's bytes (path names it in errors):
// the file is another program's and may hold anything, so a field this
// package cannot honour is refused rather than ignored.
func parseContext(path string, data []byte) (*Context, error) {
	var c Context
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("NATS context %s: %w", path, err)
	}
	// In Context's field order, so that the message is the same each time.
	var unsupported []string
	for _, f := range []struct{ key, value string }{{"nsc", c.NSC}, {"user_jwt", c.UserJWT}, {"socks_proxy", c.SocksProxy},
		{"jetstream_domain", c.JSDomain}, {"jetstream_api_prefix", c.JSAPIPrefix}, {"inbox_prefix", c.InboxPrefix}} {
		if f.value != "" {
			unsupported = append(unsupported, f.key)
		}
	}
	if len(unsupported) > 0 {
		return nil, fmt.Errorf("NATS context %s sets %s, which is not supported", path, strings.Join(unsupported, ", "))
	}
	for _, p := range []*string{&c.Creds, &c.NKey, &c.Cert, &c.Key, &c.CA} {
		*p = expandHome(*p)
	}
	return &c, nil
}

// expandHome expands a leading ~/ as the CLI does for the files a context
// names.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// Auth are the credentials and TLS files of a connection, as the
// --user, --password, --token, --nkey, --creds and --tls-* flags give
// them; TLSFirst is a context's tls_first.
type Auth struct {
	User, Password, Token, NKey, Creds, TLSCert, TLSKey, TLSCA string
	TLSFirst                                                   bool
}

// Options are the nats.go options of the set fields; a bad nkey seed
// file is an error naming --nkey.
func (a Auth) Options() ([]nats.Option, error) {
	var opts []nats.Option
	if a.User != "" {
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	}
	if a.Token != "" {
		opts = append(opts, nats.Token(a.Token))
	}
	if a.NKey != "" {
		o, err := nats.NkeyOptionFromSeed(a.NKey)
		if err != nil {
			return nil, fmt.Errorf("--nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if a.Creds != "" {
		opts = append(opts, nats.UserCredentials(a.Creds))
	}
	if a.TLSCert != "" {
		opts = append(opts, nats.ClientCert(a.TLSCert, a.TLSKey))
	}
	if a.TLSCA != "" {
		opts = append(opts, nats.RootCAs(a.TLSCA))
	}
	if a.TLSFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	return opts, nil
}
