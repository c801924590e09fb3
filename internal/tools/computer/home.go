package computer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbull/toolruntime/internal/protocol"
	"github.com/agentbull/toolruntime/internal/tools"
)

// homes is the directory that holds the agent homes.
type homes struct {
	dir  string // absolute, cleaned
	root *os.Root
}

func openHomes(dir string) (*homes, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("computer: homes' root %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("computer: creating the homes' root: %w", err)
	}
	// The root itself may be reached through symbolic links (a mounted
	// volume); what is beneath it may not.
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("computer: homes' root: %w", err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("computer: opening the homes' root: %w", err)
	}
	return &homes{dir: abs, root: r}, nil
}

func (h *homes) close() error { return h.root.Close() }

// open returns agent's home, creating it with mode 0700 when it does not
// exist. A home that is not a real directory (a symbolic link put in its
// place) is refused.
func (h *homes) open(agentID string) (*home, error) {
	if !protocol.ValidID(agentID) {
		return nil, fmt.Errorf("agent id %q cannot name a home", agentID)
	}
	if err := h.root.Mkdir(agentID, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	fi, err := h.root.Lstat(agentID)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is a %s, not a directory", agentID, fi.Mode().Type())
	}
	r, err := h.root.OpenRoot(agentID)
	if err != nil {
		return nil, err
	}
	return &home{dir: filepath.Join(h.dir, agentID), root: r}, nil
}

// home is one agent's home, open for one call.
type home struct {
	dir  string // absolute
	root *os.Root
}

func (h *home) close() { _ = h.root.Close() }

// rel turns a path the model gave into a path relative to the home, or
// says why it cannot be one. Lexical escapes are refused here with a
// message for the model; the os.Root that every access goes through
// refuses the rest (symbolic links that lead out), whatever rel let pass.
func (h *home) rel(p string) (string, error) {
	p = strings.TrimSpace(p)
	switch {
	case p == "" || p == "~" || p == ".":
		return ".", nil
	case strings.ContainsRune(p, 0):
		return "", tools.Errorf(tools.InvalidArguments, "The path contains a NUL byte.")
	case strings.HasPrefix(p, "~/"):
		p = p[2:]
	}
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(h.dir, filepath.Clean(p))
		if err != nil || !filepath.IsLocal(r) && r != "." {
			return "", outside(p)
		}
		return r, nil
	}
	clean := filepath.Clean(p)
	if clean != "." && !filepath.IsLocal(clean) {
		return "", outside(p)
	}
	return clean, nil
}

func outside(p string) error {
	return tools.Errorf(tools.InvalidArguments,
		"The path %q is outside your home directory. Paths are relative to your home (the working directory of run_command); absolute paths must lie inside it.", p)
}

// fileError words a file system error for the model: what failed, on
// which path, and the system's reason (which says "path escapes from
// parent" when a symbolic link leads out of the home).
func fileError(op, p string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return tools.Errorf(tools.ToolError, "Cannot %s %s: it does not exist.", op, p)
	case errors.Is(err, fs.ErrPermission):
		return tools.Errorf(tools.ToolError, "Cannot %s %s: permission denied.", op, p)
	}
	return tools.Errorf(tools.ToolError, "Cannot %s %s: %v.", op, p, err)
}
