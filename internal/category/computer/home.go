package computer

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Modes of the homes' root and of each home: the worker's alone. Commands
// run sandboxed with their own home as the only writable place, so
// nothing but the worker changes either; a home whose mode was changed
// anyway (chmod 000 from inside) is set back when it is next opened.
const (
	rootMode = 0o700
	homeMode = 0o700
)

// homes is the directory that holds the agent homes.
type homes struct {
	dir  string // absolute, cleaned
	root *os.Root
	log  *slog.Logger
	// repair serializes moving things aside: two calls that both saw a
	// link must not both rename, the second one the fresh home.
	repair sync.Mutex
	// owner, when set, is the user commands run as (the worker is root):
	// what the worker makes in a home is given to it at creation, so that
	// a command can change the files the file tools wrote.
	owner *owner
	// quota holds each home to its size (nil: no quota).
	quota *quotas
	// fs gives each home a file system of its own (QuotaKernel; nil:
	// none).
	fs *homeFS
}

// owner is a user and group files are given to.
type owner struct{ uid, gid int }

func openHomes(dir string, log *slog.Logger, o *owner, q *quotas) (*homes, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("computer: homes' root %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, rootMode); err != nil {
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
	h := &homes{dir: abs, root: r, log: log, owner: o, quota: q}
	h.tightenRoot()
	return h, nil
}

// tightenRoot takes away what others may do in the homes' root: anyone
// who can write it can put a link in place of a home. A volume the worker
// does not own (a Kubernetes fsGroup volume is root's, group-writable for
// the worker's group) keeps its mode, with a warning.
func (h *homes) tightenRoot() {
	fi, err := h.root.Stat(".")
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	if err := h.root.Chmod(".", rootMode); err != nil {
		h.log.Warn("the homes' root is open to other users and its mode cannot be changed; keep it writable by the worker only",
			"root", h.dir, "mode", fi.Mode().Perm().String(), "err", err)
		return
	}
	h.log.Info("the homes' root was open to other users; its mode is now 0700", "root", h.dir, "was", fi.Mode().Perm().String())
}

// close waits for the commands' inotify instances to be closed (see
// follower.close) and releases the root.
func (h *homes) close() error {
	h.quota.wait()
	h.fs.close()
	return h.root.Close()
}

// open returns agent's home, creating it with mode 0700 when it does not
// exist. Something else in its place (a symbolic link, a file) is moved
// aside to <agent_id>.moved-<time>, which no agent id can name, with a log
// line, and a fresh home is made: an agent is never locked out of its
// home for good, and nothing is followed out of the root.
func (h *homes) open(agentID string) (*home, error) {
	if !protocol.ValidID(agentID) {
		return nil, fmt.Errorf("agent id %q cannot name a home", agentID)
	}
	for range 3 { // another call of the same agent may repair it at the same time
		if err := h.root.Mkdir(agentID, homeMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		fi, err := h.root.Lstat(agentID)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			if err := h.moveAside(agentID); err != nil {
				return nil, err
			}
			continue
		}
		ownFS := false
		if h.fs != nil {
			switch err := h.fs.ensure(h.dir, agentID); {
			case err == nil:
				ownFS = true
			case errors.Is(err, errHomeNotEmpty):
				h.fs.warnOnce(h.log, agentID)
			case err != nil:
				return nil, fmt.Errorf("the home's own file system could not be mounted: %w", err)
			}
			if fi, err = h.root.Lstat(agentID); err != nil {
				return nil, err
			}
		}
		if fi.Mode().Perm() != homeMode {
			// Before opening: a home made 000 cannot be opened otherwise.
			if err := h.root.Chmod(agentID, homeMode); err != nil {
				return nil, fmt.Errorf("the home's mode is %v and cannot be set back to 0700: %w", fi.Mode().Perm(), err)
			}
			h.log.Info("an agent home's mode was changed; it is 0700 again", "agent", agentID, "was", fi.Mode().Perm().String())
		}
		r, err := h.root.OpenRoot(agentID)
		if err != nil {
			return nil, err
		}
		hm := &home{dir: filepath.Join(h.dir, agentID), agent: agentID, root: r, owner: h.owner, quota: h.quota}
		hm.ownFS = ownFS && isMountPoint(h.dir, hm.dir)
		h.adopt(agentID, hm)
		return hm, nil
	}
	return nil, fmt.Errorf("the home of %s keeps being replaced by something that is not a directory", agentID)
}

// moveAside renames what stands in the place of agentID's home, unless a
// concurrent call did so first. (Workers sharing the root do not share the
// lock; two of them repairing one home at the same instant is left to
// chance.)
func (h *homes) moveAside(agentID string) error {
	h.repair.Lock()
	defer h.repair.Unlock()
	fi, err := h.root.Lstat(agentID)
	if err != nil || fi.IsDir() {
		return nil // repaired meanwhile; the caller looks again
	}
	aside := agentID + ".moved-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	if err := h.root.Rename(agentID, aside); err != nil {
		return fmt.Errorf("the home is a %s, not a directory, and could not be moved aside: %w", typeName(fi.Mode()), err)
	}
	h.log.Warn("an agent home was not a directory; it was moved aside and a new home made",
		"agent", agentID, "was", typeName(fi.Mode()), "moved_to", filepath.Join(h.dir, aside))
	return nil
}

// adopt gives the sandbox's user, once per home, what is in a home made
// before the worker gave it what it creates (by an older worker, or with
// another --command-uid): a walk of the home, recorded in
// <agent_id>.owned in the homes' root (no agent id can name it, no
// command can reach it) with the home's inode and the owner, so that a
// home moved aside and made anew is walked again. A file with more than
// one link is left alone: its other name may be outside the home.
func (h *homes) adopt(agentID string, hm *home) {
	o := h.owner
	if o == nil {
		return
	}
	fi, err := hm.root.Stat(".")
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	marker := agentID + ".owned"
	want := fmt.Sprintf("%d %d %d\n", st.Ino, o.uid, o.gid)
	if b, err := h.root.ReadFile(marker); err == nil && string(b) == want {
		return
	}
	walkErr := fs.WalkDir(hm.root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || int(st.Uid) == o.uid && int(st.Gid) == o.gid || !e.IsDir() && st.Nlink > 1 {
			return nil
		}
		_ = hm.root.Lchown(p, o.uid, o.gid)
		return nil
	})
	if walkErr == nil {
		if err := h.root.WriteFile(marker, []byte(want), 0o600); err != nil {
			h.log.Warn("the record that an agent home was given to the sandbox's user could not be written; it is walked again next call", "agent", agentID, "err", err)
		}
	}
}

// home is one agent's home, open for one call.
type home struct {
	dir   string // absolute
	agent string
	root  *os.Root
	owner *owner  // see homes.owner
	quota *quotas // see homes.quota
	// ownFS: the home is its own file system (QuotaKernel, mounted:
	// another device than the homes' root), whose statfs is its usage.
	ownFS bool
}

// own gives rel, just made by the worker, to the sandbox's user.
func (h *home) own(rel string) error {
	if h.owner == nil {
		return nil
	}
	return h.root.Lchown(rel, h.owner.uid, h.owner.gid)
}

// mkdirAll makes the directory rel and its missing parents, each given
// to the sandbox's user.
func (h *home) mkdirAll(rel string, perm fs.FileMode) error {
	if rel == "." {
		return nil
	}
	if err := h.mkdirAll(filepath.Dir(rel), perm); err != nil {
		return err
	}
	err := h.root.Mkdir(rel, perm)
	if err == nil {
		return h.own(rel)
	}
	if errors.Is(err, fs.ErrExist) {
		fi, serr := h.root.Stat(rel)
		switch {
		case serr != nil:
			return serr // a link that leads out says so
		case fi.IsDir():
			return nil
		}
	}
	return err
}

func (h *home) close() { _ = h.root.Close() }

// workDir makes sure name, a directory of the home's top the worker uses
// itself (.tmp, .outputs), is a directory. Whatever a command put in its
// place (a file, a link to /etc) is moved aside to name.moved-<time>: a
// command must not lock run_command out of its home for good.
func (h *home) workDir(name string) error {
	for range 3 {
		err := h.root.Mkdir(name, 0o700)
		if err == nil {
			return h.own(name)
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, err := h.root.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.IsDir() {
			if fi.Mode().Perm() != 0o700 { // chmod 000 .outputs would lose every log of a non-root worker
				return h.root.Chmod(name, 0o700)
			}
			return nil
		}
		aside := name + ".moved-" + time.Now().UTC().Format("20060102T150405.000000000Z")
		if err := h.root.Rename(name, aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return fmt.Errorf("%s keeps being replaced by something that is not a directory", name)
}

// rel turns a path the model gave into a path relative to the home, or
// says why it cannot be one. Lexical escapes are refused here with a
// message for the model; the os.Root that every access goes through
// refuses the rest (symbolic links that lead out), whatever rel let pass.
func (h *home) rel(p string) (string, error) {
	p = strings.TrimSpace(p)
	quoted := false
	if len(p) >= 2 && p[0] == '"' {
		// A name as list_files shows it quoted (see shownName), taken
		// literally ("~" is a file's name then); a path that merely
		// begins with a quote is taken as it is.
		if u, err := strconv.Unquote(p); err == nil {
			p, quoted = u, true
		}
	}
	switch {
	case p == "" || p == "." || p == "~" && !quoted:
		return ".", nil
	case strings.ContainsRune(p, 0):
		return "", tool.Errorf(tool.InvalidArguments, "The path contains a NUL byte.")
	case strings.HasPrefix(p, "~/") && !quoted:
		p = p[2:]
	}
	clean := filepath.Clean(p)
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(h.dir, clean)
		if err != nil || !filepath.IsLocal(r) && r != "." {
			return "", outside(p)
		}
		clean = r
	} else if clean != "." && !filepath.IsLocal(clean) {
		return "", outside(p)
	}
	// Each component costs a lookup of every one above it: a path of
	// thousands of directories would hold the worker's CPU for minutes.
	if len(clean) > maxPathBytes || strings.Count(clean, "/") >= maxPathDepth {
		return "", tool.Errorf(tool.InvalidArguments, "The path is longer than the file tools take (%d bytes, %d directories deep at most).", maxPathBytes, maxPathDepth)
	}
	return clean, nil
}

// The longest path beneath a home the file tools take: Linux's PATH_MAX,
// and a depth no project reaches.
const (
	maxPathBytes = 4095
	maxPathDepth = 256
)

// openFile opens the regular file rel for op (a verb for the messages:
// "read", "write", "edit"), refusing anything else before a byte is read
// or written:
//
//   - O_NONBLOCK on every open: a FIFO put in a file's place, even between
//     the check and the open, opens at once (or fails with ENXIO) instead
//     of pinning the worker's thread for ever;
//   - fstat of what was opened decides: only a regular file passes;
//   - a file with more than one name (a hard link) is refused: its other
//     name may be in another agent's home, made before the sandbox
//     existed or through a volume shared with other software.
//
// flag must not hold O_TRUNC, which would cut a shared file before the
// checks; truncate the returned file instead.
func (h *home) openFile(op, shown, rel string, flag int, perm fs.FileMode) (*os.File, fs.FileInfo, error) {
	// A first look, so that a device is never opened at all.
	if fi, err := h.root.Stat(rel); err == nil {
		if err := regular(op, shown, fi); err != nil {
			return nil, nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) || flag&os.O_CREATE == 0 {
		return nil, nil, fileError(op, shown, err)
	}
	f, err := h.root.OpenFile(rel, flag|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ENXIO) { // a FIFO with no reader, opened for writing
		return nil, nil, notRegular(op, shown, fs.ModeNamedPipe)
	}
	if err != nil {
		return nil, nil, fileError(op, shown, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = regular(op, shown, fi)
	} else {
		err = fileError(op, shown, err)
	}
	if err == nil && h.owner != nil && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		// The descriptor, not the name: what is changed is what the
		// checks saw.
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != h.owner.uid || int(st.Gid) != h.owner.gid) {
			if cerr := f.Chown(h.owner.uid, h.owner.gid); cerr != nil {
				err = fileError(op, shown, cerr)
			}
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// openDir opens the directory rel for listing; O_DIRECTORY makes the open
// fail at once on anything else (a FIFO swapped in included).
func (h *home) openDir(rel string) (*os.File, error) {
	return h.root.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
}

// regular says why fi is not a file the file tools work on, or nil.
func regular(op, shown string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		hint := ""
		if op == "read" || op == "edit" {
			hint = " List it with list_files."
		}
		return tool.Errorf(tool.ToolError, "Cannot %s %s: it is a directory.%s", op, shown, hint)
	case !fi.Mode().IsRegular():
		return notRegular(op, shown, fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return tool.Errorf(tool.ToolError,
			"Cannot %s %s: it is a hard link (the same file has %d names, which may lie outside your home), so the file tools do not %s it. Copy it first (run_command `cp %s %s.copy`) and work on the copy.",
			op, shown, st.Nlink, op, shellQuote(shown), shellQuote(shown))
	}
	return nil
}

func notRegular(op, shown string, m fs.FileMode) error {
	return tool.Errorf(tool.ToolError, "Cannot %s %s: it is a %s, not a regular file; the file tools work on regular files and directories only.", op, shown, typeName(m))
}

// typeName names a file type for people.
func typeName(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeSymlink != 0:
		return "symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "block device"
	case t.IsDir():
		return "directory"
	case t.IsRegular():
		return "regular file"
	}
	return "special file"
}

func outside(p string) error {
	return tool.Errorf(tool.InvalidArguments,
		"The path %q is outside your home directory. Paths are relative to your home (the working directory of run_command); absolute paths must lie inside it.", p)
}

// fileError words a file system error for the model: what failed, on
// which path, and the system's reason (which says "path escapes from
// parent" when a symbolic link leads out of the home).
func fileError(op, p string, err error) error {
	var te *tool.Error
	if errors.As(err, &te) {
		return err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return tool.Errorf(tool.ToolError, "Cannot %s %s: it does not exist.", op, p)
	case errors.Is(err, fs.ErrPermission):
		return tool.Errorf(tool.ToolError, "Cannot %s %s: permission denied.", op, p)
	}
	return tool.Errorf(tool.ToolError, "Cannot %s %s: %v.", op, p, err)
}

// target is the file a write of rel changes: rel itself, or, when rel is
// a symbolic link (to a file in the home: the root refuses the rest), the
// file it leads to, found from the descriptor f that the checks opened.
// Renaming over the link would replace the link, not the file.
func (h *home) target(rel string, f *os.File) (string, error) {
	fi, err := h.root.Lstat(rel)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return rel, err
	}
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return "", err
	}
	r, err := filepath.Rel(h.dir, real)
	if err != nil || !filepath.IsLocal(r) {
		return "", fmt.Errorf("%s leads out of the home", rel)
	}
	return r, nil
}

// replace gives rel the content data atomically: data goes to a new file
// in the same directory, which is synced, given mode (and the sandbox's
// user) and renamed over rel. Whatever fails (a full disk, a quota),
// rel keeps its old content whole; the new file is removed.
func (h *home) replace(rel, data string, mode fs.FileMode) (err error) {
	dir, base := filepath.Dir(rel), filepath.Base(rel)
	if len(base) > 200 { // room for the suffix within NAME_MAX
		base = base[:200]
	}
	var tmp string
	var f *os.File
	for range 5 {
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		tmp = filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(rnd[:]))
		f, err = h.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = h.root.Remove(tmp)
		}
	}()
	if _, err = f.WriteString(data); err != nil {
		return err
	}
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if h.owner != nil {
		if err = f.Chown(h.owner.uid, h.owner.gid); err != nil {
			return err
		}
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		_ = h.root.Remove(tmp)
		return err
	}
	if err = h.root.Rename(tmp, rel); err != nil {
		_ = h.root.Remove(tmp)
		return err
	}
	// The rename itself outlives a crash once the directory is synced;
	// the content is already whole either way.
	if d, derr := h.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// keptMode is the part of a file's mode a replacement keeps.
func keptMode(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}
