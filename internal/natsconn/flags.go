package natsconn

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// Flags are the connection flags a program shares with the NATS CLI:
// --nats-url, --context, --user, --password, --token, --creds, --nkey,
// --tls-cert, --tls-key and --tls-ca. Each is the flag, else the
// program's own variable, else the CLI's (NATS_URL, NATS_USER, …), else
// the NATS context that --context or NATS_CONTEXT names.
type Flags struct {
	URL, Context string
	Auth
	// From the context: the file it named, and whether the URL is its
	// own (no flag or variable beat it).
	ContextPath    string
	URLFromContext bool
}

// cliEnv maps each connection flag to the NATS CLI's variable.
var cliEnv = map[string]string{
	"nats-url": "NATS_URL", "context": "NATS_CONTEXT",
	"user": "NATS_USER", "password": "NATS_PASSWORD", "token": "NATS_TOKEN", "creds": "NATS_CREDS", "nkey": "NATS_NKEY",
	"tls-cert": "NATS_CERT", "tls-key": "NATS_KEY", "tls-ca": "NATS_CA",
}

// Register adds the connection flags to fs; urlUsage is --nats-url's.
func (f *Flags) Register(fs *flag.FlagSet, urlUsage string) {
	fs.StringVar(&f.URL, "nats-url", "", urlUsage)
	fs.StringVar(&f.Context, "context", "", "NATS CLI context (as nats context ls lists them) to connect with: its URL and credentials, under the flags and NATS_* variables given (also NATS_CONTEXT)")
	fs.StringVar(&f.User, "user", "", "NATS user name")
	fs.StringVar(&f.Password, "password", "", "NATS password")
	fs.StringVar(&f.Token, "token", "", "NATS token")
	fs.StringVar(&f.NKey, "nkey", "", "NATS NKey seed file")
	fs.StringVar(&f.Creds, "creds", "", "NATS credentials file (JWT and seed)")
	fs.StringVar(&f.TLSCert, "tls-cert", "", "TLS client certificate file")
	fs.StringVar(&f.TLSKey, "tls-key", "", "TLS client key file")
	fs.StringVar(&f.TLSCA, "tls-ca", "", "TLS CA certificate file")
}

// FromEnv sets each flag of fs that set does not hold (the flags given)
// from the environment: <prefix>_<FLAG> (upper case, dashes as
// underscores), else, for a connection flag, the NATS CLI's variable.
// The flags it sets join set.
func FromEnv(fs *flag.FlagSet, set map[string]bool, prefix string, lookup func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(fl *flag.Flag) {
		if set[fl.Name] {
			return
		}
		env := prefix + "_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		v, ok := lookup(env)
		if cli := cliEnv[fl.Name]; !ok && cli != "" {
			env = cli
			v, ok = lookup(env)
		}
		if ok {
			set[fl.Name] = true
			if err := fl.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v", env, v, err))
			}
		}
	})
	return errors.Join(errs...)
}

// Resolve completes the settings once flags and variables are read (set
// holds the flags given either way): as the CLI does, a user name from
// NATS_USER with no password is a token; then the context named by
// --context fills what no flag or variable set, and a user name it gives
// with no password is a token too.
func (f *Flags) Resolve(set map[string]bool, lookup func(string) (string, bool)) error {
	if u, _ := lookup("NATS_USER"); f.User != "" && f.User == u && f.Password == "" && f.Token == "" && !set["password"] && f.Context == "" {
		f.Token, f.User = f.User, ""
	}
	if f.Context == "" {
		return nil
	}
	c, path, err := LoadContext(f.Context)
	if err != nil {
		return fmt.Errorf("--context: %w", err)
	}
	f.ContextPath = path
	for _, v := range []struct {
		flag        string
		dst         *string
		fromContext string
	}{
		{"nats-url", &f.URL, c.URL}, {"user", &f.User, c.User}, {"password", &f.Password, c.Password},
		{"token", &f.Token, c.Token}, {"creds", &f.Creds, c.Creds}, {"nkey", &f.NKey, c.NKey},
		{"tls-cert", &f.TLSCert, c.Cert}, {"tls-key", &f.TLSKey, c.Key}, {"tls-ca", &f.TLSCA, c.CA},
	} {
		if !set[v.flag] && v.fromContext != "" {
			*v.dst = v.fromContext
			f.URLFromContext = f.URLFromContext || v.flag == "nats-url"
		}
	}
	if f.Token == "" && f.User != "" && f.Password == "" && !set["user"] {
		f.Token, f.User = f.User, ""
	}
	f.TLSFirst = c.TLSFirst
	if f.URL == "" {
		return fmt.Errorf("--context: NATS context %s has no url", path)
	}
	return nil
}

// URLSource says, for an error, where the URL came from when a NATS
// context was read: the context's own, or a flag or NATS_URL over it.
func (f *Flags) URLSource() string {
	switch {
	case f.ContextPath == "":
		return ""
	case f.URLFromContext:
		return " (from NATS context " + f.ContextPath + ")"
	}
	return " (--nats-url or NATS_URL, over NATS context " + f.ContextPath + ")"
}
