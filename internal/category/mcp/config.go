package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"time"
)

// Config names the MCP servers a worker may use. It is read from a JSON
// file (LoadConfig):
//
//	{"servers": {
//	  "files":  {"command": "mcp-server-filesystem", "args": ["/srv/data"], "env": {"LOG": "1"}},
//	  "github": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"},
//	             "description": "GitHub issues and pull requests.", "timeout": "30s",
//	             "tools": {"search_issues": {"defer": false}, "delete_repo": {"disabled": true},
//	                       "delete_issue": {"approval": true}}}
//	}}
type Config struct {
	Servers map[string]ServerConfig `json:"servers"`
}

// ServerConfig is one server: either a command run as a child process
// speaking MCP over stdio, or a streamable HTTP endpoint.
type ServerConfig struct {
	// Command and Args start a stdio server. The child gets PATH, HOME,
	// USER, LOGNAME, SHELL, TERM, LANG, TMPDIR and TZ from the worker's
	// environment, then Env; nothing else of the worker's environment
	// (which holds its NATS credentials) reaches it.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Dir is the child's working directory (default: the worker's).
	Dir string `json:"dir,omitempty"`

	// URL is a streamable HTTP endpoint; Headers are sent with every
	// request.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// OAuth has the url's requests authorized with OAuth 2.1 tokens
	// (docs/mcp-client.md) instead of static headers.
	OAuth *OAuthConfig `json:"oauth,omitempty"`

	// Description is the namespace description the model reads. Empty:
	// the server's instructions, else its name and version.
	Description string `json:"description,omitempty"`
	// Defer keeps the server's tools behind tool search (default true).
	Defer *bool `json:"defer,omitempty"`
	// Timeout bounds one call of the server's tools (default: the
	// worker's call timeout).
	Timeout Duration `json:"timeout,omitzero"`
	// ConnectTimeout bounds starting and initializing a session
	// (default 15s).
	ConnectTimeout Duration `json:"connect_timeout,omitzero"`
	// Tools adjusts single tools, by their MCP name.
	Tools map[string]ToolConfig `json:"tools,omitempty"`
	// Approval has every call of the server's tools wait for a person's
	// approval (protocol 1.1).
	Approval bool `json:"approval,omitempty"`
}

// ToolConfig adjusts one tool of a server.
type ToolConfig struct {
	// Defer overrides the server's Defer for this tool.
	Defer *bool `json:"defer,omitempty"`
	// Timeout overrides the server's Timeout for this tool.
	Timeout Duration `json:"timeout,omitzero"`
	// Disabled leaves the tool out of every turn.
	Disabled bool `json:"disabled,omitempty"`
	// Approval has the tool's calls wait for a person's approval.
	Approval bool `json:"approval,omitempty"`
}

// ApprovalNames are the tools the configuration holds for approval, in
// the form of the worker's approval policy: "server.*" for a whole
// server, "server.tool" for one tool.
func (c Config) ApprovalNames() []string {
	var out []string
	for _, name := range c.names() {
		s := c.Servers[name]
		if s.Approval {
			out = append(out, name+".*")
			continue
		}
		tools := make([]string, 0, len(s.Tools))
		for tool, tc := range s.Tools {
			if tc.Approval {
				tools = append(tools, name+"."+tool)
			}
		}
		slices.Sort(tools)
		out = append(out, tools...)
	}
	return out
}

// HasStdio reports whether a server is a command (a stdio child).
func (c Config) HasStdio() bool {
	for _, s := range c.Servers {
		if s.Command != "" {
			return true
		}
	}
	return false
}

// HasOAuth reports whether a server's tokens are per credential owner
// (oauth with the authorization code grant): the worker then needs the
// token vault.
func (c Config) HasOAuth() bool {
	for _, s := range c.Servers {
		if s.OAuth.perOwner() {
			return true
		}
	}
	return false
}

// Duration is a time.Duration written as a Go duration string ("30s").
type Duration time.Duration

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// DefaultConnectTimeout bounds starting and initializing a session when
// the configuration does not.
const DefaultConnectTimeout = 15 * time.Second

// validName is the namespace rule of package tools: a server's name is
// its tools' namespace.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// LoadConfig reads and checks a configuration file. Unknown fields are
// errors, so that a misspelt setting never goes unnoticed.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("mcp config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("mcp config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes and checks a configuration.
func ParseConfig(data []byte) (Config, error) {
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, errors.New("data after the JSON object")
	}
	return cfg, cfg.Validate()
}

// Validate checks every server and names each problem.
func (c Config) Validate() error {
	var errs []error
	for _, name := range c.names() {
		s := c.Servers[name]
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("server %q: %s", name, fmt.Sprintf(format, args...)))
		}
		if !validName.MatchString(name) {
			bad("the name is the tools' namespace and must match %s", validName)
		}
		switch {
		case s.Command == "" && s.URL == "":
			bad("needs a command (stdio) or a url (streamable HTTP)")
		case s.Command != "" && s.URL != "":
			bad("has both a command and a url; give one")
		case s.URL != "":
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad("url %q is not an http(s) URL", s.URL)
			}
			if len(s.Args) > 0 || len(s.Env) > 0 || s.Dir != "" {
				bad("args, env and dir belong to a command, not a url")
			}
		default:
			if len(s.Headers) > 0 {
				bad("headers belong to a url, not a command")
			}
			if s.OAuth != nil {
				bad("oauth belongs to a url, not a command")
			}
		}
		if s.OAuth != nil && s.URL != "" {
			for _, e := range s.OAuth.validate() {
				bad("oauth: %s", e)
			}
		}
		if s.Timeout < 0 || s.ConnectTimeout < 0 {
			bad("timeouts must not be negative")
		}
		for tool, tc := range s.Tools {
			if tc.Timeout < 0 {
				bad("tool %q: the timeout must not be negative", tool)
			}
		}
	}
	return errors.Join(errs...)
}

// names returns the configured server names, sorted: the order of the
// servers' namespaces in a catalog.
func (c Config) names() []string {
	out := make([]string, 0, len(c.Servers))
	for name := range c.Servers {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func (s ServerConfig) connectTimeout() time.Duration {
	if s.ConnectTimeout > 0 {
		return time.Duration(s.ConnectTimeout)
	}
	return DefaultConnectTimeout
}

// deferred reports whether tool is deferred: the tool's setting, else the
// server's, else true.
func (s ServerConfig) deferred(tool string) bool {
	if d := s.Tools[tool].Defer; d != nil {
		return *d
	}
	if s.Defer != nil {
		return *s.Defer
	}
	return true
}

func (s ServerConfig) timeout(tool string) time.Duration {
	if t := s.Tools[tool].Timeout; t > 0 {
		return time.Duration(t)
	}
	return time.Duration(s.Timeout)
}

// expand replaces ${NAME} with the worker's environment variable NAME, so
// that secrets stay out of the file. Only the braced form is expanded: a
// lone $ is kept.
func expand(s string) string {
	return envRef.ReplaceAllStringFunc(s, func(m string) string {
		return os.Getenv(m[2 : len(m)-1])
	})
}

var envRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)
