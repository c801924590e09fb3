package skills

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/agentbull/toolruntime/tool"
)

// Library is the skills of one directory, loaded once at start. It is
// immutable apart from a cache of built tools, and safe for concurrent
// use. A nil *Library has no skills.
type Library struct {
	dir    string
	skills map[string]*Skill
	names  []string

	mu    sync.Mutex
	tools map[string]*tool.Tool // read_skill per set of enabled skills
}

// FileName is the file that makes a folder a skill.
const FileName = "SKILL.md"

// Load reads every <dir>/<name>/SKILL.md. Folders without one, and
// hidden folders, are passed over; any SKILL.md that does not parse is an
// error naming its file, so that a broken skill stops the start instead
// of going missing.
func Load(dir string) (*Library, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("skills: %w", err)
	}
	lib := &Library{dir: dir, skills: map[string]*Skill{}, tools: map[string]*tool.Tool{}}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name(), FileName)
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("skills: %w", err))
			continue
		}
		s, err := Parse(data, e.Name())
		if err != nil {
			errs = append(errs, fmt.Errorf("skills: %s: %w", path, err))
			continue
		}
		s.Path = path
		lib.skills[s.Name] = s
		lib.names = append(lib.names, s.Name)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.Sort(lib.names)
	return lib, nil
}

// Names returns the skills' names, sorted.
func (l *Library) Names() []string {
	if l == nil {
		return nil
	}
	return l.names
}

// Get returns the named skill.
func (l *Library) Get(name string) (*Skill, bool) {
	if l == nil {
		return nil, false
	}
	s, ok := l.skills[name]
	return s, ok
}

// ServersFor returns the MCP servers the named skills need, sorted, once
// each; names that are not skills of the library are passed over. It is
// what package mcp asks to enable a turn's skills' servers.
func (l *Library) ServersFor(names []string) []string {
	var out []string
	for _, n := range names {
		if s, ok := l.Get(n); ok {
			out = append(out, s.MCPServers...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// enabled splits a turn's skill names into those the library has
// (sorted, once each) and notes on the rest.
func (l *Library) enabled(names []string) ([]*Skill, []string) {
	var got []*Skill
	var notes []string
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if s, ok := l.Get(n); ok {
			got = append(got, s)
		} else {
			notes = append(notes, fmt.Sprintf("skill %q is not available on this worker", n))
		}
	}
	slices.SortFunc(got, func(a, b *Skill) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(notes)
	return got, notes
}
