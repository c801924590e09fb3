package console

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/agentbull/toolruntime/internal/natsconn"
	"github.com/nats-io/nats.go"
)

// Conn holds the console's connection settings, read as the worker reads
// its own (README, "Configuration"): a flag, else its CONSOLE_* variable,
// else the NATS CLI's (NATS_URL, NATS_USER, …), else the NATS context
// named by --context or NATS_CONTEXT (package natsconn reads it, for both).
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
		ctx, path, err := natsconn.LoadContext(c.Context)
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
	auth, err := natsconn.Auth{User: c.User, Password: c.Password, Token: c.Token, NKey: c.NKey, Creds: c.Creds,
		TLSCert: c.TLSCert, TLSKey: c.TLSKey, TLSCA: c.TLSCA, TLSFirst: c.tlsFirst}.Options()
	return append(opts, auth...), err
}
