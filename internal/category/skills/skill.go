package skills

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Skill is one SKILL.md: what the catalog shows of it and the text
// read_skill returns.
type Skill struct {
	// Name is the folder's name, repeated in the front matter.
	Name string
	// Description says what the skill is for and when to use it.
	Description string
	// MCPServers are the MCP servers the skill needs; a turn that enables
	// the skill enables them too.
	MCPServers []string
	// Body is the Markdown after the front matter.
	Body string
	// Path is the SKILL.md file.
	Path string
}

// Limits of a skill, from the Agent Skills format where it sets them.
const (
	MaxNameLength        = 64
	MaxDescriptionLength = 1024
	// MaxFileBytes bounds SKILL.md: its body goes to the model whole.
	MaxFileBytes = 256 << 10
)

var (
	validName   = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	validServer = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// frontMatter is the YAML at the top of SKILL.md. Fields other than
// these (license, compatibility, …) are accepted and ignored.
type frontMatter struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// MCPServers is this worker's own field: a list, or one string of
	// names separated by commas or spaces.
	MCPServers stringList `yaml:"mcp_servers"`
	// Metadata is the Agent Skills format's free-form map; its
	// mcp_servers key is read like the field above.
	Metadata map[string]any `yaml:"metadata"`
	// AllowedTools is the Agent Skills format's pre-approved tools; an
	// entry mcp__<server> or mcp__<server>__<tool> (Claude Code's names
	// for MCP tools) enables <server>. Other entries are ignored.
	AllowedTools stringList `yaml:"allowed-tools"`
}

// stringList is a YAML list of strings, or one string of items separated
// by commas or white space.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = splitList(n.Value)
		return nil
	case yaml.SequenceNode:
		var items []string
		if err := n.Decode(&items); err != nil {
			return err
		}
		*l = items
		return nil
	}
	return fmt.Errorf("line %d: want a list of names or a string of them", n.Line)
}

func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

// Parse reads a SKILL.md: front matter between "---" lines, then the
// Markdown body. folder is the name of the folder holding it, which the
// name must equal.
func Parse(data []byte, folder string) (*Skill, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%d bytes, over the %d byte limit", len(data), MaxFileBytes)
	}
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return nil, errors.New(`does not start with front matter ("---" on the first line)`)
	}
	rest := text[len("---\n"):]
	end := -1
	for i := 0; i <= len(rest); {
		j := strings.IndexByte(rest[i:], '\n')
		line := rest[i:]
		if j >= 0 {
			line = rest[i : i+j]
		}
		if line == "---" || line == "..." {
			end = i
			break
		}
		if j < 0 {
			break
		}
		i += j + 1
	}
	if end < 0 {
		return nil, errors.New(`front matter is not closed by a "---" line`)
	}
	var fm frontMatter
	if err := yaml.Unmarshal([]byte(rest[:end]), &fm); err != nil {
		return nil, fmt.Errorf("front matter: %w", err)
	}
	body := rest[end:]
	if i := strings.IndexByte(body, '\n'); i >= 0 {
		body = body[i+1:]
	} else {
		body = ""
	}
	s := &Skill{Name: fm.Name, Description: strings.TrimSpace(fm.Description), Body: strings.TrimSpace(body) + "\n"}
	s.MCPServers = fm.servers()
	var errs []error
	switch {
	case s.Name == "":
		errs = append(errs, errors.New("name is missing"))
	case len(s.Name) > MaxNameLength || !validName.MatchString(s.Name):
		errs = append(errs, fmt.Errorf("name %q is not 1-%d lower-case letters, digits and single hyphens", s.Name, MaxNameLength))
	case s.Name != folder:
		errs = append(errs, fmt.Errorf("name %q is not the folder's name %q", s.Name, folder))
	}
	switch {
	case s.Description == "":
		errs = append(errs, errors.New("description is missing"))
	case len(s.Description) > MaxDescriptionLength:
		errs = append(errs, fmt.Errorf("description is %d bytes, over %d", len(s.Description), MaxDescriptionLength))
	}
	for _, srv := range s.MCPServers {
		if !validServer.MatchString(srv) {
			errs = append(errs, fmt.Errorf("mcp server %q is not a server name (%s)", srv, validServer))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// servers gathers the MCP servers the front matter names, sorted, once
// each.
func (fm frontMatter) servers() []string {
	out := slices.Clone([]string(fm.MCPServers))
	switch v := fm.Metadata["mcp_servers"].(type) {
	case string:
		out = append(out, splitList(v)...)
	case []any:
		for _, item := range v {
			if s, ok := item.(string); ok {
				out = append(out, s)
			}
		}
	}
	for _, tool := range fm.AllowedTools {
		rest, ok := strings.CutPrefix(tool, "mcp__")
		if !ok {
			continue
		}
		server, _, _ := strings.Cut(rest, "__")
		if server != "" {
			out = append(out, server)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
