package computer

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/agentbull/toolruntime/internal/mountinfo"

	"golang.org/x/sys/unix"

	"github.com/agentbull/toolruntime/protocol"
)

// Quota modes (Config.QuotaMode).
const (
	// QuotaEstimate holds each home to its quota by counting (quotas):
	// it needs nothing from the host, and a writer can pass the quota by
	// what it writes before the worker sees it.
	QuotaEstimate = "estimate"
	// QuotaKernel gives each home a file system of its own, an ext4
	// image of the quota's size and inodes, loop-mounted on the home: the
	// kernel refuses the write past it (ENOSPC), to that home alone.
	QuotaKernel = "kernel"
	// QuotaAuto is QuotaKernel where the host allows it (root or
	// CAP_SYS_ADMIN, loop devices, mkfs.ext4), else QuotaEstimate.
	QuotaAuto = "auto"
)

// homeFS makes and mounts the per-home file systems of QuotaKernel: the
// image <root>/<agent_id>.img (no agent id can name it, no command can
// reach it), sparse, made by mkfs.ext4 with the quota's inodes, mounted
// on <root>/<agent_id> with nosuid and nodev. The counting quota goes on
// beside it (the reserve of the shared file system needs it, and it
// stops a command near its quota), its count the file system's own
// (fsUsage); the kernel's limit is the hard one.
type homeFS struct {
	bytes, files int64
	mkfs         string
	owner        *owner
	mu           sync.Mutex
	mounted      map[string]bool // the homes this process mounted
	warned       map[string]bool // the homes left to the estimate, said once
	// reaper unmounts the homes should this process end without close
	// (a kill): it waits for the end of its stdin, which reaperW holds.
	reaper  *exec.Cmd
	reaperW *os.File
}

// reaperScript unmounts (lazily), once its stdin ends, the mount points
// it was sent, a line each: the homes this worker mounted, when the
// worker ends however it ends (a kill included). A line "-" forgets
// those sent before (the worker unmounted them itself). $1 is the
// homes' root, for ps.
const reaperScript = `shift
while IFS= read -r mp; do
	case "$mp" in -) set -- ;; *) set -- "$@" "$mp" ;; esac
done
for mp do umount -l "$mp" 2>/dev/null; done`

// reap tells the reaper of a home this process mounted (or, "-", that
// it unmounted them all). Under mu.
func (k *homeFS) reap(dir string) {
	if k.reaperW != nil && !strings.ContainsRune(dir, '\n') {
		_, _ = k.reaperW.WriteString(dir + "\n")
	}
}

// startReaper starts the process that unmounts the homes after this one
// ends (a mount outlives the process that made it): in a process group
// of its own, so that a kill of the worker's group leaves it to work.
func (k *homeFS) startReaper(root string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command("/bin/sh", "-c", reaperScript, "homes-reaper", root)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return err
	}
	r.Close()
	k.reaper, k.reaperW = cmd, w
	return nil
}

// newHomeFS checks that per-home file systems can be made and mounted
// under root, by making and mounting one (a probe, removed), and returns
// them, or says why not.
func newHomeFS(root string, bytes, files int64, o *owner) (*homeFS, error) {
	if bytes <= 0 || files <= 0 {
		return nil, errors.New("a home file system needs both bounds (--home-quota and --home-files)")
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		return nil, errors.New("mkfs.ext4 is not installed (e2fsprogs)")
	}
	k := &homeFS{bytes: bytes, files: files, mkfs: mkfs, owner: o, mounted: map[string]bool{}, warned: map[string]bool{}}
	probe, err := os.MkdirTemp(root, ".homefs-probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(probe)
	dir := filepath.Join(probe, "home")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	if err := k.mount(filepath.Join(probe, "home.img"), dir); err != nil {
		return nil, err
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		return nil, fmt.Errorf("unmounting the probe: %w", err)
	}
	return k, nil
}

// homeMount is a mount found under the homes' root at start.
type homeMount struct {
	dir, source string
}

// recoverMounts takes over what a worker that ended without closing (a
// crash, a kill) left under root: a home's file system still mounted on
// it is kept and unmounted at close like one this process mounted (its
// loop device is the image's, and mounting the image again would reuse
// it anyway); a probe's mount is unmounted and removed; a loop device
// that still holds an image under root that nothing mounts is detached.
// It returns what it did, for the start log.
func (k *homeFS) recoverMounts(root string) (kept, cleaned int) {
	mounts := mountsUnder(root)
	k.mu.Lock()
	defer k.mu.Unlock()
	busy := map[string]bool{} // loop devices a mount under root holds
	for _, m := range mounts {
		rel, err := filepath.Rel(root, m.dir)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		busy[m.source] = true
		first, _, nested := strings.Cut(rel, string(filepath.Separator))
		switch {
		case strings.HasPrefix(first, ".homefs-probe-"):
			if unix.Unmount(m.dir, unix.MNT_DETACH) == nil {
				cleaned++
			}
			_ = os.RemoveAll(filepath.Join(root, first))
		case !nested && protocol.ValidID(first) && loopBacking(m.source) == filepath.Join(root, first+".img"):
			if !k.mounted[m.dir] {
				k.mounted[m.dir] = true
				k.reap(m.dir)
				kept++
			}
		}
	}
	devs, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, p := range devs {
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(p)))
		img := loopBacking(dev)
		if busy[dev] || filepath.Dir(img) != root || filepath.Ext(img) != ".img" {
			continue
		}
		if detachLoop(dev) == nil {
			cleaned++
		}
	}
	return kept, cleaned
}

// mountsUnder lists the mounts at or beneath root in this process's
// mount namespace, from /proc/self/mountinfo.
func mountsUnder(root string) []homeMount {
	all, err := mountinfo.Read()
	if err != nil {
		return nil
	}
	var out []homeMount
	for _, m := range all {
		if m.Point == root || strings.HasPrefix(m.Point, root+"/") {
			out = append(out, homeMount{dir: m.Point, source: m.Source})
		}
	}
	return out
}

// loopBacking is the file the loop device dev (/dev/loopN) holds, or "".
func loopBacking(dev string) string {
	name, ok := strings.CutPrefix(dev, "/dev/")
	if !ok || !strings.HasPrefix(name, "loop") {
		return ""
	}
	b, err := os.ReadFile("/sys/block/" + name + "/loop/backing_file")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// detachLoop frees the loop device dev (LOOP_CLR_FD): one still in use
// is freed by the kernel when its last user lets go.
func detachLoop(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
}

// ensure mounts agent's file system on its home dir under root, making
// the image first when there is none. A home that is already a mount
// point is left as it is; a home that holds files and has no image
// keeps them, counted by the estimate alone (errHomeNotEmpty).
func (k *homeFS) ensure(root, agent string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	dir := filepath.Join(root, agent)
	if isMountPoint(root, dir) {
		return nil
	}
	img := filepath.Join(root, agent+".img")
	if _, err := os.Lstat(img); errors.Is(err, os.ErrNotExist) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			// The worker's own empty directories (a command made .tmp
			// before the homes had file systems of their own) are not
			// the agent's files: the mount hides them.
			if (e.Name() == tmpDir || e.Name() == outputsDir) && e.IsDir() && os.Remove(filepath.Join(dir, e.Name())) == nil {
				continue
			}
			return errHomeNotEmpty
		}
	}
	if err := k.mount(img, dir); err != nil {
		return err
	}
	k.mounted[dir] = true
	k.reap(dir)
	return nil
}

var errHomeNotEmpty = errors.New("the home holds files from before its file system was made")

// mount makes the image img when it is missing and mounts it on dir.
func (k *homeFS) mount(img, dir string) error {
	fi, err := os.Lstat(img)
	if errors.Is(err, os.ErrNotExist) {
		if err := k.make(img); err != nil {
			_ = os.Remove(img)
			return err
		}
	} else if err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", img)
	}
	out, err := exec.Command("mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noatime", img, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mount: %v: %s", err, bytes.TrimSpace(out))
	}
	// lost+found would be an entry of the agent's own; e2fsck makes it
	// again when it needs it.
	_ = os.Remove(filepath.Join(dir, "lost+found"))
	return nil
}

// make creates img: sparse, the quota's size, and an ext4 file system
// with the quota's inodes, no blocks reserved for root, no journal (the
// journal would take a megabyte or more of a small home), its root
// given to the sandbox's user.
func (k *homeFS) make(img string) error {
	f, err := os.OpenFile(img, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(k.bytes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	args := []string{"-q", "-F", "-m", "0", "-N", strconv.FormatInt(k.files, 10), "-O", "^has_journal,^resize_inode", "-b", "4096"}
	if k.owner != nil {
		args = append(args, "-E", fmt.Sprintf("root_owner=%d:%d", k.owner.uid, k.owner.gid))
	}
	args = append(args, img)
	if out, err := exec.Command(k.mkfs, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// close unmounts the homes this process mounted (their images stay; the
// next start mounts them again).
func (k *homeFS) close() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for dir := range k.mounted {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
	}
	clear(k.mounted)
	k.reap("-")
	if k.reaperW != nil {
		_ = k.reaperW.Close()
		_ = k.reaper.Wait()
		k.reaper, k.reaperW = nil, nil
	}
}

// isMountPoint says whether dir is on another file system than root.
func isMountPoint(root, dir string) bool {
	var a, b unix.Stat_t
	return unix.Stat(root, &a) == nil && unix.Lstat(dir, &b) == nil && a.Dev != b.Dev
}

// warnOnce says, once per home, that agent's home keeps the files it
// had before and is held by the estimate alone.
func (k *homeFS) warnOnce(log *slog.Logger, agent string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.warned[agent] {
		return
	}
	k.warned[agent] = true
	log.Warn("an agent home holds files from before the homes had file systems of their own: it keeps them, and its quota is the worker's count alone (empty the home to have it given its own file system)", "agent", agent)
}

// commandsHeldBy says, for the estimate's start line, what holds a
// command near its home's bounds.
func commandsHeldBy(cfg Config) string {
	switch {
	case cfg.Sandbox == nil:
		return "its walks and events alone (commands run without a sandbox)"
	case cfg.Sandbox.Cgroups():
		return "its cgroup's CPU bandwidth (a cgroup per command)"
	}
	return "SIGSTOP/SIGCONT of every process of its sandbox from the worker (no cgroup per command here): stopped for each confirming walk, paced by a duty cycle near a bound"
}

// chooseQuotaMode sets up cfg.QuotaMode on h and says at start which mode
// holds the homes, and why.
func chooseQuotaMode(h *homes, cfg Config) error {
	mode := cfg.QuotaMode
	if mode == "" {
		mode = QuotaEstimate
	}
	switch mode {
	case QuotaEstimate:
		cfg.Logger.Info("home quotas are held by the worker's count (--home-quota-mode estimate): a writer can pass its quota by what it writes before it is stopped",
			"home_quota", cfg.HomeQuotaBytes, "home_files", cfg.HomeQuotaFiles, "commands_held_by", commandsHeldBy(cfg))
		return nil
	case QuotaKernel, QuotaAuto:
	default:
		return fmt.Errorf("computer: quota mode %q is not auto, kernel or estimate", mode)
	}
	k, err := newHomeFS(h.dir, cfg.HomeQuotaBytes, cfg.HomeQuotaFiles, h.owner)
	if err != nil {
		if mode == QuotaKernel {
			return fmt.Errorf("computer: --home-quota-mode kernel: a home's file system cannot be made here: %w", err)
		}
		cfg.Logger.Warn("home quotas are held by the worker's count, because a home's own file system cannot be made here (--home-quota-mode auto): a writer can pass its quota by what it writes before it is stopped (docs/operations.md, \"Disk quota and full disks\", gives the bounds)",
			"reason", err.Error(), "home_quota", cfg.HomeQuotaBytes, "home_files", cfg.HomeQuotaFiles, "commands_held_by", commandsHeldBy(cfg))
		return nil
	}
	if err := k.startReaper(h.dir); err != nil {
		return fmt.Errorf("computer: the homes' file systems: starting the process that unmounts them after the worker: %w", err)
	}
	h.fs = k
	kept, cleaned := k.recoverMounts(h.dir)
	why := "--home-quota-mode kernel"
	if mode == QuotaAuto {
		why = "--home-quota-mode auto, and this host can make and loop-mount a home's file system (a probe did)"
	}
	cfg.Logger.Info("home quotas are held by the kernel: each home is an ext4 file system of its own (<root>/<agent_id>.img, loop-mounted), of the quota's size and inodes; a write past either gets ENOSPC in that home alone; the worker's count runs beside it",
		"mode", mode, "why", why, "home_quota", cfg.HomeQuotaBytes, "home_files", cfg.HomeQuotaFiles,
		"mounts_kept_from_before", kept, "mounts_and_loops_cleaned", cleaned)
	return nil
}
