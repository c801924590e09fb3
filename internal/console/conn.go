package console

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Conn holds the console's connection settings, read as the worker reads
// its own (README, "Configuration"): a flag, else its CONSOLE_* variable,
// else the NATS CLI's (NATS_URL, NATS_USER, …), else the NATS context
// named by --context or NATS_CONTEXT. The worker's code for this is
// unexported in package worker, so the few lines are repeated here.
type Conn struct {
	URL, Context, User, Password, Token, Creds, NKey, TLSCert, TLSKey, TLSCA string
	tlsFirst                                                                 bool
}

// connFlags maps each flag to the CLI's variable.
var connFlags = []struct{ flag, env, usage string }{
	{"nats-url", "NATS_URL", "NATS server or cluster URLs (comma-separated); default nats://127.0.0.1:4222"},
	{"context", "NATS_CONTEXT", "NATS CLI context (as nats context ls lists them) to connect with"},
	{"user", "NATS_USER", "NATS user name"},
	{"password", "NATS_PASSWORD", "NATS password"},
	{"token", "NATS_TOKEN", "NATS authentication token (not the console's own: that is --console-token-file)"},
	{"creds", "NATS_CREDS", "NATS credentials file (JWT and seed)"},
	{"nkey", "NATS_NKEY", "NATS nkey seed file"},
	{"tls-cert", "NATS_CERT", "TLS client certificate file"},
	{"tls-key", "NATS_KEY", "TLS client key file"},
	{"tls-ca", "NATS_CA", "TLS CA certificate file"},
}

func (c *Conn) fields() []*string {
	return []*string{&c.URL, &c.Context, &c.User, &c.Password, &c.Token, &c.Creds, &c.NKey, &c.TLSCert, &c.TLSKey, &c.TLSCA}
}

// Register adds the connection flags to fs.
func (c *Conn) Register(fs *flag.FlagSet) {
	for i, f := range connFlags {
		fs.StringVar(c.fields()[i], f.flag, "", f.usage)
	}
}

// Resolve fills what no flag set from the environment and the context;
// set holds the flags given.
func (c *Conn) Resolve(set map[string]bool, getenv func(string) string) error {
	for i, f := range connFlags {
		if set[f.flag] {
			continue
		}
		dst := c.fields()[i]
		if v := getenv("CONSOLE_" + strings.ToUpper(strings.ReplaceAll(f.flag, "-", "_"))); v != "" {
			*dst = v
		} else if v := getenv(f.env); v != "" {
			*dst = v
			set[f.flag] = true
		}
	}
	if c.Context != "" {
		ctx, path, err := loadContext(c.Context)
		if err != nil {
			return fmt.Errorf("--context: %w", err)
		}
		for i, v := range []string{ctx.URL, "", ctx.User, ctx.Password, ctx.Token, ctx.Creds, ctx.NKey, ctx.Cert, ctx.Key, ctx.CA} {
			if dst := c.fields()[i]; !set[connFlags[i].flag] && v != "" && *dst == "" {
				*dst = v
			}
		}
		c.tlsFirst = ctx.TLSFirst
		if c.URL == "" {
			return fmt.Errorf("--context: NATS context %s has no url", path)
		}
	}
	// The CLI also takes a token as the user name with no password.
	if c.Token == "" && c.User != "" && c.Password == "" {
		c.Token, c.User = c.User, ""
	}
	if c.URL == "" {
		c.URL = nats.DefaultURL
	}
	return nil
}

// Options are the nats.go options of the settings.
func (c *Conn) Options(name string) ([]nats.Option, error) {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(500 * time.Millisecond)}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.NKey != "" {
		o, err := nats.NkeyOptionFromSeed(c.NKey)
		if err != nil {
			return nil, fmt.Errorf("--nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.tlsFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	return opts, nil
}

// natsContext is the part of a NATS CLI context file (ADR-21) used here.
type natsContext struct {
	URL, Token, User, Password, Creds, NKey, Cert, Key, CA string
	TLSFirst                                               bool `json:"tls_first"`
	NSC                                                    string
	UserJWT                                                string `json:"user_jwt"`
	JSDomain                                               string `json:"jetstream_domain"`
	JSAPIPrefix                                            string `json:"jetstream_api_prefix"`
	InboxPrefix                                            string `json:"inbox_prefix"`
	SocksProxy                                             string `json:"socks_proxy"`
}

func loadContext(name string) (*natsContext, string, error) {
	path := name
	if !strings.HasSuffix(name, ".json") || !strings.ContainsRune(name, os.PathSeparator) {
		if strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
			return nil, "", fmt.Errorf("%q is not a context name", name)
		}
		dir := os.Getenv("XDG_CONFIG_HOME")
		if dir == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, "", err
			}
			dir = filepath.Join(home, ".config")
		}
		path = filepath.Join(dir, "nats", "context", name+".json")
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, path, fmt.Errorf("no NATS context %q: %s does not exist (`nats context ls` lists them)", name, path)
	} else if err != nil {
		return nil, path, err
	}
	var c natsContext
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, path, fmt.Errorf("NATS context %s: %w", path, err)
	}
	var bad []string
	for k, v := range map[string]string{"nsc": c.NSC, "user_jwt": c.UserJWT, "socks_proxy": c.SocksProxy,
		"jetstream_domain": c.JSDomain, "jetstream_api_prefix": c.JSAPIPrefix, "inbox_prefix": c.InboxPrefix} {
		if v != "" {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		return nil, path, fmt.Errorf("NATS context %s sets %s, which the console does not support", path, strings.Join(bad, ", "))
	}
	for _, p := range []*string{&c.Creds, &c.NKey, &c.Cert, &c.Key, &c.CA} {
		if rest, ok := strings.CutPrefix(*p, "~/"); ok {
			if home, err := os.UserHomeDir(); err == nil {
				*p = filepath.Join(home, rest)
			}
		}
	}
	return &c, path, nil
}
