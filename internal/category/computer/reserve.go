package computer

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/tool"
)

// Defaults of the reserve: the free space (and free inodes) the homes
// together never take from their file system, so that what shares it (a
// JetStream store, the worker's own logs, the system) always has room.
// Each is at most an eighth of the file system.
const (
	DefaultDiskReserve      = 128 << 20
	DefaultDiskReserveFiles = 8192
)

// reserveGrowth and reserveGrowthFiles are how much a home must have
// grown, since its command started, for that command to be stopped at
// the reserve's watch line: a quiet agent's small writes beside a writer
// that takes the disk are not its to answer for.
const (
	reserveGrowth      = 1 << 20
	reserveGrowthFiles = 64
)

// diskFree is what the homes' file system has free: bytes an ordinary
// user may still take, and inodes (-1: the file system does not count
// them, as btrfs).
type diskFree struct{ bytes, files int64 }

// free reads the homes' file system (ok false: it cannot be read, or no
// reserve is kept).
func (q *quotas) free() (diskFree, bool) {
	if q == nil || q.fsDir == "" || q.reserve <= 0 && q.reserveFiles <= 0 {
		return diskFree{}, false
	}
	var st unix.Statfs_t
	if unix.Statfs(q.fsDir, &st) != nil {
		return diskFree{}, false
	}
	d := diskFree{bytes: int64(st.Bavail) * st.Bsize, files: int64(st.Ffree)}
	if st.Files == 0 {
		d.files = -1
	}
	return d, true
}

// belowLine says whether the file system is below the reserve's watch
// line (twice the reserve): commands that grow their home are stopped
// from there, so that the reserve itself is never crossed by a writer
// the worker is a moment late to see.
func (q *quotas) belowLine(d diskFree) (bytes, files bool) {
	return q.reserve > 0 && d.bytes < 2*q.reserve, q.reserveFiles > 0 && d.files >= 0 && d.files < 2*q.reserveFiles
}

// smallWrite is the largest write of the file tools that may go below
// the reserve's watch line (never below the reserve): a quiet agent's
// notes beside a writer that took the disk to the line still go in,
// while a writer taking the disk in big writes stops at the line.
const smallWrite = 64 << 10

// admitReserve says whether a write of bytes and files more, by the file
// tools, would take the reserve: any write that would leave less than
// the reserve free, and a write of more than smallWrite that would leave
// less than twice it (the line where commands are stopped).
func (q *quotas) admitReserve(bytes, files int64) error {
	d, ok := q.free()
	if !ok {
		return nil
	}
	floor := q.reserve
	if bytes > smallWrite {
		floor = 2 * q.reserve
	}
	if q.reserve > 0 && bytes > 0 && d.bytes-bytes < floor ||
		q.reserveFiles > 0 && files > 0 && d.files >= 0 && d.files-files < q.reserveFiles {
		return q.fullError(d, bytes)
	}
	return nil
}

// fullError is the model's error for a write the disk's reserve refuses.
func (q *quotas) fullError(d diskFree, adding int64) error {
	return tool.Errorf(tool.ToolError, "The disk your home is on is nearly full: %s%s Nothing was written. Delete files you no longer need (find them with run_command `du -a . | sort -n | tail`) and try again.",
		q.diskNote(d), addingNote(adding))
}

// diskNote says the file system's free space against the reserve.
func (q *quotas) diskNote(d diskFree) string {
	s := fmt.Sprintf("%s free, of which the last %s are kept for the worker's message store and the system", textclip.ByteCount(d.bytes), textclip.ByteCount(q.reserve))
	if q.reserveFiles > 0 && d.files >= 0 {
		s += fmt.Sprintf(", %d inodes free (the last %d kept)", d.files, q.reserveFiles)
	}
	return s
}

// reserveSizes are the reserve of a file system of total bytes and
// inodes: want (0: the defaults, an eighth of the file system at most;
// negative: none).
func reserveSizes(want, totalBytes, totalFiles int64) (bytes, files int64) {
	switch {
	case want < 0:
		return 0, 0
	case want == 0:
		bytes = min(DefaultDiskReserve, totalBytes/8)
	default:
		bytes = want
	}
	if totalFiles > 0 {
		files = min(DefaultDiskReserveFiles, totalFiles/8)
	}
	return bytes, files
}

// overReserve says whether u, a walk of the home a command runs in, shows
// the command grew the home while the file system went below the
// reserve's watch line: the command is then stopped (errOverReserve),
// charged to the home that grew.
func (w *follower) overReserve(u *usage) bool {
	d, ok := w.q.free()
	if !ok {
		return false
	}
	lowBytes, lowFiles := w.q.belowLine(d)
	return lowBytes && u.bytes-w.start.bytes > reserveGrowth || lowFiles && u.files-w.start.files > reserveGrowthFiles
}

// nearReserve says whether the file system is below the watch line and
// the estimate says the home grew: a walk is then due at once.
func (w *follower) nearReserve() bool {
	d, ok := w.q.free()
	if !ok {
		return false
	}
	lowBytes, lowFiles := w.q.belowLine(d)
	return lowBytes && w.est.bytes-w.start.bytes > reserveGrowth || lowFiles && w.est.files-w.start.files > reserveGrowthFiles
}

// errOverReserve stops a command that grew its home while the disk went
// below the reserve's watch line; it is an errOverQuota.
var errOverReserve = fmt.Errorf("%w: the disk the homes share is nearly full", errOverQuota)

// ReserveInfo says the reserve a Category keeps on the homes' file system.
type ReserveInfo struct {
	Bytes, Files int64 // 0: none
	FreeBytes    int64 // the file system's free space at start
	// Store is what is known of the message store's place: "shared" (on
	// the homes' file system), "separate", or "unknown" (no path given).
	Store string
}

// keepReserve sets the reserve of the homes' file system on h's quotas
// (making them, when the homes have no quota) and says at start what it
// keeps and whether the message store shares that file system.
func keepReserve(h *homes, cfg Config) {
	var st unix.Statfs_t
	if err := unix.Statfs(h.dir, &st); err != nil {
		cfg.Logger.Warn("the homes' file system cannot be measured: no reserve of free space is kept on it", "root", h.dir, "err", err)
		return
	}
	total := int64(st.Blocks) * st.Bsize
	bytes, files := reserveSizes(cfg.DiskReserve, total, int64(st.Files))
	store := storePlace(h.dir, cfg.StorePath)
	if bytes <= 0 && files <= 0 {
		cfg.Logger.Warn("no reserve of free space is kept on the homes' file system (--home-reserve -1): an agent can fill it", "root", h.dir, "store", store)
		return
	}
	if h.quota == nil {
		h.quota = emptyQuotas(0, 0)
	}
	h.quota.reserve, h.quota.reserveFiles, h.quota.fsDir = bytes, files, h.dir
	msg := "the homes keep a reserve of free space on their file system: a write that would take it is refused, a command growing its home below twice it is stopped"
	args := []any{"root", h.dir, "reserve", textclip.ByteCount(bytes), "reserve_inodes", files,
		"free", textclip.ByteCount(int64(st.Bavail) * st.Bsize), "store", store}
	switch store {
	case "shared":
		msg += "; the JetStream store shares this file system, and the reserve is what keeps it writable"
		args = append(args, "store_path", cfg.StorePath)
	case "unknown":
		msg += "; where the JetStream store is, is not known (an external server: name its store with --store-path to have it checked)"
	}
	cfg.Logger.Info(msg, args...)
}

// storePlace says where the store at path is against the homes' root:
// "shared", "separate" or "unknown".
func storePlace(root, path string) string {
	if path == "" {
		return "unknown"
	}
	dev := func(p string) (uint64, bool) {
		for ; ; p = filepath.Dir(p) {
			var st unix.Stat_t
			if unix.Stat(p, &st) == nil {
				return st.Dev, true
			}
			if p == filepath.Dir(p) {
				return 0, false
			}
		}
	}
	a, okA := dev(root)
	b, okB := dev(path)
	switch {
	case !okA || !okB:
		return "unknown"
	case a == b:
		return "shared"
	}
	return "separate"
}
