package computer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/tool"
)

// Defaults of the quota of each home.
const (
	DefaultHomeQuotaBytes = 1 << 30
	DefaultHomeQuotaFiles = 100_000
)

// quotaBlock is the unit a command's file size limit is rounded to.
const quotaBlock = 4096

// usageTTL is how long a home's usage, counted by a walk of it, is taken
// as it is; the file tools add what they write meanwhile, and each
// command is followed by a walk. Other workers on a shared root change it
// too, so it is counted again after this long.
const usageTTL = 30 * time.Second

// quotas holds every home to a size on disk and a count of entries, by
// counting: a walk of the home (the blocks its files hold, and its files,
// directories and links) cached per agent, what the file tools write
// admitted against it before it is written, and a command whose files
// are capped at the room left (RLIMIT_FSIZE) and that is stopped once its
// follower (inotify, walks, statfs) finds the home over. Nil: no quota.
type quotas struct {
	bytes, files int64 // each <= 0: that one is not bounded
	mu           sync.Mutex
	use          map[string]*usage // by agent id
	// running are the followers of the commands running in each home
	// (by agent id), each with the cancel of its command: the first
	// walk that finds a home over stops every command that grew it.
	running map[string]map[*follower]context.CancelCauseFunc
	// noNotify follows commands by walks alone, without inotify (to
	// measure what inotify adds).
	noNotify bool
	// closing are the inotify instances being closed (see
	// follower.close).
	closing sync.WaitGroup
	// reserve and reserveFiles are the free bytes and inodes the homes
	// together never take from fsDir's file system (each <= 0: none).
	reserve, reserveFiles int64
	fsDir                 string
	// xattrs keeps what the last walks of the biggest homes read of
	// their entries' extended attributes (quota_xattrs.go).
	xattrs xattrCache
	// ticked, if set, is called at each tick of a follower's walk (for
	// tests).
	ticked func()
}

// usage is a home's usage: bytes on disk and entries.
type usage struct {
	bytes, files int64
	at           time.Time
	// over: the walk stopped early, at far more entries than the quota
	// allows (walkCap); bytes is then a lower bound.
	over bool
	// xattr is the bytes of extended attributes counted in bytes.
	xattr int64
	// blind counts the directories the walk could not open: the home is
	// then taken as over its quota, never as smaller than it is.
	blind int64
}

func newQuotas(bytes, files int64) *quotas {
	if bytes <= 0 && files <= 0 {
		return nil
	}
	return emptyQuotas(bytes, files)
}

// emptyQuotas is quotas of bytes and files (each <= 0: unbounded), no
// home counted yet.
func emptyQuotas(bytes, files int64) *quotas {
	return &quotas{bytes: bytes, files: files, use: map[string]*usage{}, running: map[string]map[*follower]context.CancelCauseFunc{}}
}

// Usage is a home's usage as the quota counts it.
type Usage struct {
	Bytes, Files           int64
	QuotaBytes, QuotaFiles int64
}

// admit reserves bytes and files more for h's agent, or says that its
// home would go over its quota. A negative size (a file made smaller)
// is always admitted. The caller gives back what it did not write with
// release.
func (q *quotas) admit(h *home, bytes, files int64) error {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.current(h)
	overBytes := q.bytes > 0 && bytes > 0 && u.bytes+bytes > q.bytes
	overFiles := q.files > 0 && files > 0 && (u.over || u.files+files > q.files)
	if overBytes || overFiles {
		return q.overError(u, bytes, "Nothing was written. ")
	}
	if err := q.admitReserve(bytes, files); err != nil {
		return err
	}
	u.bytes += bytes
	u.files += files
	return nil
}

// release gives back a reservation that was not written.
func (q *quotas) release(h *home, bytes, files int64) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if u := q.use[h.agent]; u != nil {
		u.bytes -= bytes
		u.files -= files
	}
}

// current is h's usage, counted anew when it is unknown or old. Under mu.
func (q *quotas) current(h *home) *usage {
	u := q.use[h.agent]
	if u == nil || time.Since(u.at) > usageTTL {
		u = q.walk(h)
		q.use[h.agent] = u
	}
	return u
}

// recount counts h's usage anew (after a command) and says whether it
// is over the quota.
func (q *quotas) recount(h *home) (*usage, bool) {
	u := q.walk(h)
	cached := *u // admit changes the cached one under mu; u is the caller's
	q.mu.Lock()
	q.use[h.agent] = &cached
	q.mu.Unlock()
	return u, q.isOver(u)
}

func (q *quotas) isOver(u *usage) bool {
	return q.bytes > 0 && u.bytes > q.bytes || q.files > 0 && (u.over || u.files > q.files) || u.blind > 0
}

// full says whether h's home is at or over a bound now (nil: no quota).
func (q *quotas) full(h *home) bool {
	if q == nil {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.atBound(q.current(h))
}

// atBound says whether u, a home's usage, is at or over a bound: over
// one, or with no byte or entry left to grow by.
func (q *quotas) atBound(u *usage) bool {
	return q.isOver(u) || q.bytes > 0 && u.bytes >= q.bytes || q.files > 0 && u.files >= q.files
}

// room is how many bytes h may still grow by (-1: unbounded): what its
// quota has left, and never more than the file system has free above
// the reserve.
func (q *quotas) room(h *home) int64 {
	if q == nil {
		return -1
	}
	room := int64(-1)
	if q.bytes > 0 {
		q.mu.Lock()
		room = max(q.bytes-q.current(h).bytes, 0)
		q.mu.Unlock()
	}
	if d, ok := q.free(); ok && q.reserve > 0 {
		disk := max(d.bytes-2*q.reserve, 0) // one file stops at the watch line
		if room < 0 || disk < room {
			room = disk
		}
	}
	return room
}

// overError is the model's error for a home at or over its quota.
func (q *quotas) overError(u *usage, adding int64, what string) error {
	return tool.Errorf(tool.ToolError, "Your home is over its disk quota: %s%s %s Delete files you no longer need (find them with run_command `du -a . | sort -n | tail`) and try again.",
		q.describe(u), addingNote(adding), what)
}

func addingNote(n int64) string {
	if n <= 0 {
		return "."
	}
	return fmt.Sprintf("; this write adds %s.", textclip.ByteCount(n))
}

// describe says a usage against the quota: "1.0 GiB of 1.0 GiB on disk,
// 12 of 100000 files".
func (q *quotas) describe(u *usage) string {
	var s string
	if q.bytes > 0 {
		s = fmt.Sprintf("%s of the %s it may hold on disk", textclip.ByteCount(u.bytes), textclip.ByteCount(q.bytes))
	} else {
		s = textclip.ByteCount(u.bytes) + " on disk"
	}
	files := fmt.Sprint(u.files)
	if u.over {
		files = "more than " + files
	}
	if q.files > 0 {
		s += fmt.Sprintf(", %s of the %d files and directories it may hold", files, q.files)
	} else {
		s += ", " + files + " files and directories"
	}
	if u.blind > 0 {
		s += fmt.Sprintf(", and %d directories the worker could not read (counted as over)", u.blind)
	}
	if d, ok := q.free(); ok {
		if lb, lf := q.belowLine(d); lb || lf {
			s += "; the disk the homes share is nearly full: " + q.diskNote(d)
		}
	}
	return s
}

// walk counts what h holds: the blocks of everything beneath it (what the
// disk gives it, so a sparse file costs what it holds), each file once
// however many names it has (hard links), the extended attributes of
// each entry (their bytes, and the inode space they take where the file
// system charges them so, as tmpfs does), and every entry. It reads each
// directory in batches through the home's root, at any depth, and stops
// once there are far more entries than the quota allows.
func (q *quotas) walk(h *home) *usage { return q.walkDirs(h, nil, nil, q.walkCap(), nil, nil) }

// walkCap is how many entries past the files bound a walk counts before
// it stops: a home a little over its bound is counted exactly, so that
// every further entry is seen as growth (and stopped), while a walk of a
// home far over it stays bounded.
func (q *quotas) walkCap() int64 {
	if q.files <= 0 {
		return -1
	}
	return 2*q.files + 1024
}

// xattrInode is the inode space one byte of extended attributes takes on
// tmpfs, which charges them to its inode count (BOGO_INODE_SIZE): a
// home's attributes count as that many entries more.
const xattrInode = 1024

// walkDirs is walk, calling dir with each directory it opens (rel from
// the home, "." first) and tick (if any) every walkTick entries (tick
// true: the walk stops there, and walkDirs returns nil), counting
// up to limit entries (-1: all). Given carry, it takes the extended
// attributes from it instead of reading them (a syscall per entry): a
// walk that confirms a stop must be quick, and attributes raise no event
// the follower reads, so the backstop walks alone count them anew.
// Given names, it puts every entry it counts in it (names.ok: it counted
// them all).
func (q *quotas) walkDirs(h *home, dir func(rel string, f *os.File), tick func() bool, limit int64, carry *usage, names *entrySet) *usage {
	if u := fsUsage(h); u != nil {
		return u
	}
	u := &usage{at: time.Now()}
	if names != nil {
		names.reset()
		defer func() { names.ok = names.ok && !u.over && u.blind == 0 }()
	}
	xattrs := carry == nil
	var xattrBytes int64
	var xc *xattrWalk
	if xattrs {
		xc = q.xattrs.begin(h.agent, u.at)
	}
	linked := map[uint64]bool{} // inodes of more than one name, counted once
	cut := false                // tick stopped the walk
	defer func() {
		if xattrs && !cut { // a cut walk leaves the last whole one's
			q.xattrs.end(h.agent, xc)
		}
	}()
	// Each directory is opened beneath the one that holds it (O_NOFOLLOW:
	// a link swapped in is not followed), one openat each. There is no
	// depth limit: a directory that cannot be opened (descriptors used
	// up) counts the home as over (blind), never as empty.
	var walkDir func(f *os.File, rel string)
	walkDir = func(f *os.File, rel string) {
		defer f.Close()
		if dir != nil {
			dir(rel, f)
		}
		fd := int(f.Fd())
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			u.bytes += st.Blocks * 512
			if xattrs {
				xattrBytes += xc.bytes(&st, func() int64 { return fdXattrBytes(fd) })
			}
		} else if xattrs {
			xattrBytes += fdXattrBytes(fd)
		}
		for !u.over {
			ents, err := f.ReadDir(1024)
			for _, e := range ents {
				if cut {
					return
				}
				u.files++
				if tick != nil && u.files%walkTick == 0 && tick() {
					cut = true
					return
				}
				if limit >= 0 && u.files > limit {
					u.over = true
					return
				}
				if names != nil {
					names.walked(rel, e.Name())
				}
				if e.IsDir() {
					// Its attributes are counted once it is open
					// (above), through its descriptor.
					sub, err := openSubdir(fd, e.Name())
					if err == nil {
						walkDir(sub, rel+"/"+e.Name())
					} else if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
						u.blind++
					}
					continue
				}
				if unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
					if st.Nlink > 1 && st.Mode&unix.S_IFMT == unix.S_IFREG {
						if linked[st.Ino] {
							continue
						}
						linked[st.Ino] = true
					}
					u.bytes += st.Blocks * 512
					if xattrs {
						name := e.Name()
						xattrBytes += xc.bytes(&st, func() int64 { return xattrBytesAt(fd, name) })
					}
				} else if xattrs {
					xattrBytes += xattrBytesAt(fd, e.Name())
				}
			}
			if err != nil || len(ents) == 0 { // io.EOF at the end
				return
			}
		}
	}
	if f, err := h.openDir("."); err == nil {
		walkDir(f, ".")
	}
	if cut {
		return nil
	}
	if !xattrs {
		xattrBytes = carry.xattr
	}
	u.xattr = xattrBytes
	u.bytes += xattrBytes
	u.files += (xattrBytes + xattrInode - 1) / xattrInode
	return u
}

// ext4Reserved are the inodes ext4 takes for itself (1 to 10, the root
// directory's among them; the first of the agent's is 11): what statfs
// counts as used in an empty home of its own file system.
const ext4Reserved = 10

// fsUsage is the usage of a home that is a file system of its own
// (QuotaKernel), from its statfs: the blocks in use (files, directories,
// the blocks their extents and attributes take; a file no name holds
// too) and the inodes in use, past ext4's own. It is exact, and costs one
// call however many entries the home holds, where a walk of 41,600 took
// a quarter of a second. Nil: not such a home, or statfs failed (then
// the home is walked).
func fsUsage(h *home) *usage {
	if !h.ownFS {
		return nil
	}
	f, err := h.openDir(".")
	if err != nil {
		return nil
	}
	defer f.Close()
	var st unix.Statfs_t
	if unix.Fstatfs(int(f.Fd()), &st) != nil || st.Blocks < st.Bfree || st.Files < st.Ffree {
		return nil
	}
	return &usage{at: time.Now(), bytes: int64(st.Blocks-st.Bfree) * st.Bsize, files: max(int64(st.Files-st.Ffree)-ext4Reserved, 0)}
}

// openSubdir opens the directory name beneath the directory dirfd, not
// following a link. A directory its owner made unreadable (chmod 300,
// which stops a worker that is not root) is opened anyway: the worker
// owns what is in the homes (or is the user commands run as), so it
// gives the directory read and search for the open and sets its mode
// back at once; the descriptor reads it either way.
func openSubdir(dirfd int, name string) (*os.File, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err == nil {
		return os.NewFile(uintptr(fd), name), nil
	}
	if !errors.Is(err, unix.EACCES) {
		return nil, err
	}
	// O_PATH needs no permission on the directory itself; chmod through
	// its descriptor changes what was opened, not what a name now holds.
	p, perr := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if perr != nil {
		return nil, err
	}
	defer unix.Close(p)
	var st unix.Stat_t
	if unix.Fstat(p, &st) != nil {
		return nil, err
	}
	proc := "/proc/self/fd/" + strconv.Itoa(p)
	mode := st.Mode & 0o7777
	if unix.Chmod(proc, mode|0o500) != nil {
		return nil, err
	}
	fd, err = unix.Openat(p, ".", flags, 0)
	_ = unix.Chmod(proc, mode)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// fdXattrBytes is the size of the extended attributes of the open file
// fd: their names and values.
func fdXattrBytes(fd int) int64 {
	n, err := unix.Flistxattr(fd, nil)
	if err != nil || n <= 0 {
		return 0
	}
	names := make([]byte, n)
	n, err = unix.Flistxattr(fd, names)
	if err != nil {
		return 0
	}
	total := int64(n)
	for _, name := range bytes.Split(names[:n], []byte{0}) {
		if len(name) == 0 {
			continue
		}
		if v, err := unix.Fgetxattr(fd, string(name), nil); err == nil {
			total += int64(v)
		}
	}
	return total
}

// xattrBytesAt is fdXattrBytes of name beneath the directory dirfd, not
// following a link (a link's own attributes are counted). A file with
// none costs one llistxattr.
func xattrBytesAt(dirfd int, name string) int64 {
	p := "/proc/self/fd/" + strconv.Itoa(dirfd) + "/" + name
	n, err := unix.Llistxattr(p, nil)
	if err != nil || n <= 0 {
		return 0
	}
	names := make([]byte, n)
	n, err = unix.Llistxattr(p, names)
	if err != nil {
		return 0
	}
	total := int64(n)
	for _, a := range bytes.Split(names[:n], []byte{0}) {
		if len(a) == 0 {
			continue
		}
		if v, err := unix.Lgetxattr(p, string(a), nil); err == nil {
			total += int64(v)
		}
	}
	return total
}

// errOverQuota stops a command whose home went over its quota.
var errOverQuota = errors.New("the home went over its disk quota")

// How often a running command's home is walked in full: at least this
// long apart, and never more than a fifth of the time (a walk that takes
// 10 ms is followed by 40 ms without). With inotify the walk is only the
// backstop (for writes through mmap, directories past the watch budget,
// a lost event), so it is slower.
const (
	walkGap        = 20 * time.Millisecond
	walkGapNotify  = 100 * time.Millisecond
	maxWatches     = 4096    // directories watched per command
	fsGrowth       = 1 << 20 // the least growth of the file system that asks for a walk
	maxTrackedSize = 65_536  // entries whose size a follower remembers
	entryMargin    = 32      // entries the event count may pass the bound by before it stops a command unconfirmed
	// burstRead is a read of events that stops the command while the
	// follower takes them in (some 500 events: the command ran that far
	// ahead of it). A follower that keeps up reads a few at a time. A
	// walk looks at the events queued every walkTick entries it counts,
	// and stops the command for the rest of it once as many are queued.
	burstRead = 16 << 10
	walkTick  = 32
)

// notifyMask are the inotify events that change what a home holds.
const notifyMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_DELETE | unix.IN_ATTRIB | unix.IN_ONLYDIR

// follower follows one home while one command runs: it keeps an estimate
// of the home's usage, raised at once by inotify events (a file created,
// written, moved in; an entry deleted) from a walk's count, and walks
// the home to confirm before it stops the command. The estimate errs
// high (a file the command rewrites counts whole, its old blocks too),
// never low for what inotify sees, so a walk confirms every stop. Where
// inotify is missing or exhausted it walks every walkGap instead.
type follower struct {
	q *quotas
	h *home
	// f is the inotify instance (nil: none); dirs the watched
	// directories by watch descriptor, relative to the home.
	f       *os.File
	dirs    map[int32]string
	watched map[string]bool // the values of dirs
	// est is the usage estimate; sizes the bytes last seen of each entry
	// an event named, so that a file written again adds only its growth.
	est   usage
	sizes map[string]int64
	// touched are the entries the events of one read named as created or
	// written, each looked at once when the read's events are in: a busy
	// writer's many writes to one file are one lstat, not one each.
	touched map[string]bool
	// xtouched are the entries whose attributes changed (IN_ATTRIB):
	// their extended attributes are read once per read's events, and
	// xsizes is what they held when last read. attrib: some grew since
	// the last walk, which then counts them all (a quick walk carries
	// the last full walk's total).
	xtouched map[string]bool
	xsizes   map[string]int64
	attrib   bool
	// walkNow: an event the estimate cannot follow (a directory moved,
	// the event queue overflowed) asks for a walk.
	walkNow bool
	// start is the home's usage when the command started; walked, the
	// last walk's count.
	start, walked usage
	// top is the home's directory, whose file system statfs reads: when
	// the file system grew by more than the home's room since the last
	// walk, something (perhaps where no watch looks) may have taken the
	// home over, and a walk runs at once.
	top    *os.File
	fsUsed int64
	// pace holds a command that grows its home fast to a share of a
	// core near its bounds (quota_pace.go).
	pace pace
	// tree holds the command's processes where it has no cgroup
	// (quota_freeze.go): stopped for each confirming walk, and for a
	// walk once the estimate crosses line, a line below the bounds
	// raised after each walk that finds the home under them.
	tree    atomic.Pointer[procTree]
	line    usage // the run loop's alone
	lineSet bool
	// held is the part of est.bytes that files no name holds take while
	// the command's processes hold them open or mapped (deleted, or made
	// with O_TMPFILE; quota_held.go), read from the tree's descriptors
	// and mappings: at each walk, at most heldGap apart while events
	// come, at once when an event names a file no longer there (a write
	// to a deleted file still names it), and whenever the file system
	// grows by more than the estimate does. dev is the home's device.
	held int64
	// heldSizes is each of those files' part of held (capFiles).
	heldSizes []int64
	heldAt    time.Time
	// heldNow: an event named a written file that is gone.
	heldNow bool
	// heldFS is what the file system held at the last look at held, and
	// heldEst the estimate then.
	heldFS, heldEst int64
	dev             uint64
	// startHeld: setTree stopped the command before its first
	// instruction (a home at or over its bound); the run loop lets it
	// go once it follows the home.
	startHeld atomic.Bool
	// pressed: pressure stopped the command during a walk, or a burst
	// ahead of the line after a read (ahead: then the walk that
	// confirms comes at once).
	pressed, ahead bool
	notify         *os.File // w.f as follow made it: setTree wakes the loop through it
	// names are the entries est counts, each once (nil where entries
	// are not bounded): see entrySet.
	names *entrySet
	// done is the command's end (run's context): a walk stops there.
	done <-chan struct{}
}

// tick is the walks' tick: pressure, and whether the command ended.
func (w *follower) tick() bool {
	if w.q.ticked != nil {
		w.q.ticked()
	}
	w.pressure()
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// follow starts following h, before its command starts so that the
// home's own directory is watched from the command's first write.
func (q *quotas) follow(h *home) *follower {
	if q == nil {
		return nil
	}
	w := &follower{q: q, h: h, fsUsed: -1, dirs: map[int32]string{}, watched: map[string]bool{}, sizes: map[string]int64{}, touched: map[string]bool{}, xtouched: map[string]bool{}, xsizes: map[string]int64{}}
	// The usage the command starts from is the cached one (room, just
	// before, made it fresh): a walk in run could come after the
	// command's first writes on a busy host, and miss its growth.
	q.mu.Lock()
	w.start = *q.current(h)
	q.mu.Unlock()
	if q.files > 0 && !h.ownFS {
		w.names = newEntrySet(q.files)
	}
	if top, err := h.openDir("."); err == nil {
		w.top = top
		var st unix.Stat_t
		if unix.Fstat(int(top.Fd()), &st) == nil {
			w.dev = st.Dev
		}
	}
	if q.noNotify || h.ownFS {
		// A home of its own file system is counted by statfs, as often
		// as walkGap: no event adds to that.
		return w
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return w // e.g. EMFILE: max_user_instances is used up; walks alone
	}
	w.f = os.NewFile(uintptr(fd), "inotify")
	w.notify = w.f
	if top, err := h.openDir("."); err == nil {
		w.addWatch(".", top)
		top.Close()
	}
	return w
}

// addWatch watches the directory f, which is rel in the home, through
// the descriptor: a path could be swapped for a link out of the home.
func (w *follower) addWatch(rel string, f *os.File) {
	if w.f == nil || len(w.dirs) >= maxWatches || w.watched[rel] {
		return
	}
	wd, err := unix.InotifyAddWatch(int(w.f.Fd()), "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), notifyMask)
	if err == nil {
		if old, ok := w.dirs[int32(wd)]; ok {
			delete(w.watched, old) // the directory moved
		}
		w.dirs[int32(wd)] = rel
		w.watched[rel] = true
	}
}

// close releases the inotify instance, in the background: closing one
// waits for the kernel to free its watches (fsnotify's SRCU grace
// period), which can take longer than a short command's whole run, so it
// is kept off the call's path. The follower is done with it: run has
// returned. quotas.wait waits for the closes.
func (w *follower) close() {
	if w == nil {
		return
	}
	if f := w.f; f != nil {
		w.f = nil
		w.q.closing.Go(func() { _ = f.Close() })
	}
	if w.top != nil {
		_ = w.top.Close()
	}
}

// wait waits for the followers' inotify instances to be closed.
func (q *quotas) wait() {
	if q != nil {
		q.closing.Wait()
	}
}

// used is what the home's file system holds, in bytes (-1: unknown).
func (w *follower) used() int64 {
	var st unix.Statfs_t
	if w.top == nil || unix.Fstatfs(int(w.top.Fd()), &st) != nil {
		return -1
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// fsGrew says whether the file system grew by more than the home's room
// since the last walk.
func (w *follower) fsGrew() bool {
	if w.fsUsed < 0 || w.q.bytes <= 0 {
		return false
	}
	u := w.used()
	room := w.q.bytes - w.est.bytes
	if w.overLine() || w.lineSet {
		// Held from userland: growth past the line asks for a walk.
		room = min(room, w.line.bytes-w.est.bytes)
	}
	return u >= 0 && u-w.fsUsed > max(room, fsGrowth)
}

// walkCap is how far the follower's walks count: one entry past the
// bound or past what the home held at the start, whichever is more (a
// home a little over is counted exactly, so that every entry the command
// adds is growth, and a walk that confirms a stop costs no more than
// that); as far as the start's walk did when that one stopped early (the
// events then tell growth).
func (w *follower) walkCap() int64 {
	switch {
	case w.q.files <= 0:
		return -1
	case w.start.over:
		return w.q.walkCap()
	}
	return max(w.q.files, w.start.files) + 1
}

// urgent says whether the estimate calls for a walk at once: it is over
// the quota and grew since the last walk (a home the last walk found over
// is walked again only when it grows), or an event or statfs asked.
func (w *follower) urgent() bool {
	grew := w.est.bytes > w.walked.bytes || w.est.files > w.walked.files
	return w.walkNow || w.gated() || grew && (w.q.isOver(&w.est) || w.overLine()) || w.fsGrew() || w.nearReserve()
}

// walk counts the home, watching every directory it opens, and makes the
// count the estimate and the quota's cached usage. It stops once the
// command has ended (nil): the count after the command (recount) is the
// one that matters then, and a walk of a big home would keep the call
// waiting for nothing (half a second for 40,000 entries).
func (w *follower) walk(quick bool) *usage {
	var dir func(string, *os.File)
	if w.f != nil {
		dir = w.addWatch
	}
	var carry *usage
	if quick && !w.attrib {
		carry = &w.walked
	}
	w.attrib = false
	u := w.q.walkDirs(w.h, dir, w.tick, w.walkCap(), carry, w.names)
	if u == nil {
		return nil
	}
	if w.h.ownFS {
		// The file system's own count holds every block, those of files
		// no name holds included.
	} else if t := w.tree.Load(); t != nil {
		// Files the command deleted but holds open count for its home
		// while it runs.
		w.held, w.heldSizes = t.heldBy(w.dev, t.stopped())
		w.heldAt, w.heldNow = time.Now(), false
		u.bytes += w.held
	} else if fs := w.used(); fs >= 0 && w.fsUsed > 0 && fs-w.fsUsed-(u.bytes-w.walked.bytes) > fsGrowth {
		// The file system grew by more than the home's count did: the
		// difference may be files the command deleted but holds open.
		u.bytes += heldDeleted(w.h.dir)
	}
	w.est, w.walked = *u, *u
	w.capFiles()
	w.walkNow = false
	w.fsUsed = w.used()
	w.heldFS, w.heldEst = w.fsUsed, w.est.bytes
	cached := *u // admit changes the cached one under mu; u stays the follower's
	w.q.mu.Lock()
	w.q.use[w.h.agent] = &cached
	w.q.mu.Unlock()
	if w.pressed && !quick {
		// The command ran a burst ahead while the walk counted. Past
		// the line it stays stopped for a walk that confirms (its
		// count here was partly taken while it ran); under it, it goes
		// on, and the read that follows takes its events in, the
		// command stopped again (burstRead). A confirming walk's
		// caller lets it go.
		if w.nearBound() {
			w.walkNow = true
			return u
		}
		w.tree.Load().thaw()
		w.letGo()
	}
	w.pressed = false
	return u
}

// run follows the home until ctx ends and cancels the command (cause
// errOverQuota) once a walk finds the home over its quota and grown since
// the command began: a command that deletes files in a home already over
// (rm) runs on. That walk stops the home's other commands that began
// below what it found too: each follower would find the same at its next
// walk, and several writers on a busy host must not each wait for their
// own follower to be run.
func (w *follower) run(ctx context.Context, cancel context.CancelCauseFunc) {
	if w == nil {
		return
	}
	w.q.register(w, cancel)
	defer w.q.unregister(w)
	w.done = ctx.Done()
	began := time.Now()
	u := w.walk(false)
	if u == nil {
		return // the command ended first
	}
	if w.q.isOver(u) && grewPast(u, &w.start) {
		// The command grew a home over its bound while the first walk
		// counted it (a home already over: at once).
		w.tree.Load().freeze() // stopped at once; the kill follows
		w.q.stopGrown(w.h, u)
		return
	}
	cost := time.Since(began)
	last := time.Now()
	start := &w.start
	if w.f != nil {
		f := w.f
		stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	var t *time.Timer
	buf := make([]byte, 64<<10)
	for {
		gap := walkGap
		if w.f != nil && len(w.dirs) < maxWatches {
			gap = walkGapNotify // inotify sees every directory
		}
		due := last.Add(max(gap, 4*cost)) // the backstop
		urgent := w.urgent()
		if !urgent && !w.pressed {
			w.letGo() // caught up (nothing held: nothing to do)
		}
		if urgent && !w.pressed && w.fsGrew() {
			// Grown where no event tells, past the room: stopped (held,
			// with a cgroup) from now until the walk that confirms
			// (below).
			w.pressed = w.tree.Load().hold() || w.holdCPU()
		}
		if urgent {
			due = last.Add(cost) // confirm at once, walking at most half the time
			if w.gated() || w.ahead {
				// A home at or over its bound when the command began:
				// its first growth is confirmed now, the command
				// stopped (below) for the walk; so is a burst ahead of
				// the line (below).
				due = time.Now()
			}
		}
		if w.startHeld.Load() {
			// setTree held the command from before its first
			// instruction, in a home at or over its bound: it runs
			// once the follower has counted the home and watches it.
			w.startHeld.Store(false)
			if !w.pressed { // else the walk that confirms lets it go
				w.tree.Load().thaw()
			}
		}
		// Wake up at least every walkGap to read statfs (heldWake with a
		// tree: held files grow where no event tells).
		wake := due
		every := walkGap
		if w.tree.Load() != nil {
			every = heldWake
		}
		if soon := time.Now().Add(every); soon.Before(wake) {
			wake = soon
		}
		if !time.Now().Before(due) {
			if urgent && w.tree.Load() != nil {
				// The walk confirms what is: the command's processes
				// add nothing while it counts (where they have no
				// cgroup; killed stopped when it confirms), and the
				// events they queued before are read first, so that
				// none counts again after the walk. Near a bound they
				// run only where the worker leaves a core idle from
				// now on (procTree.lower).
				if w.nearBound() {
					w.tree.Load().lower()
				}
				w.tree.Load().freeze()
				w.drain(buf)
			} else if urgent {
				// With a cgroup: held while the walk confirms.
				w.holdCPU()
			}
			began := time.Now()
			u := w.walk(urgent)
			if u == nil {
				return
			}
			w.ahead = false
			last = time.Now()
			cost = last.Sub(began)
			if w.q.isOver(u) && grewPast(u, start) {
				w.tree.Load().freeze() // stopped at once; the kill follows
				w.q.stopGrown(w.h, u)
				return
			}
			w.raiseLine(u)
			w.repace()
			if urgent {
				w.tree.Load().thaw()
				w.letGo()
			}
			if w.overReserve(u) {
				w.tree.Load().freeze()
				cancel(errOverReserve)
				return
			}
			continue
		}
		if w.f != nil {
			_ = w.f.SetReadDeadline(wake)
			if ctx.Err() != nil {
				return
			}
			n, err := w.f.Read(buf)
			if ctx.Err() != nil {
				return
			}
			held := false
			if n > 0 && w.tight() || n >= burstRead {
				// In a home at or over its bound, the command is
				// stopped while the follower takes in what it did: a
				// growth is then confirmed (gated) before it runs again.
				// So is a command that ran a burst of events ahead of
				// the follower (a read of burstRead or more): taking
				// in a read's events (an lstat per file named) takes
				// longer than the command needs to make them, and a
				// writer of empty files left running meanwhile went
				// thousands of entries past its bound on a loaded host
				// before the follower's first look could pace it.
				w.tree.Load().freeze()
				held = w.tree.Load() != nil
			}
			// With a cgroup, a burst is held as well while the follower
			// takes it in (holdCPU).
			cpuHeld := n >= burstRead && w.holdCPU()
			before := w.est.files
			parseEvents(buf[:n], w.event)
			if held {
				w.drain(buf) // what came meanwhile, the command stopped
			}
			if w.q.files > 0 && w.est.files > max(w.q.files, start.files)+entryMargin {
				// Entries are counted exactly by the events (created,
				// moved in, deleted, moved out, each once: see
				// entrySet; the margin is for a home too big for the
				// set, whose events count as they come): a writer of
				// empty files is stopped at once, not after a walk of
				// the entries it keeps making nor after an lstat of
				// each file the events name. Where the command has a
				// process tree (no cgroup), it is stopped at once and a
				// walk confirms: stopped, it adds nothing while the walk
				// counts.
				if t := w.tree.Load(); t != nil {
					t.lower()
					t.freeze()
					w.drain(buf)
					u := w.walk(true)
					if u == nil {
						return
					}
					if w.q.isOver(u) && grewPast(u, start) {
						w.q.stopGrown(w.h, u)
						return
					}
					w.raiseLine(&w.walked)
					w.repace()
					t.thaw()
					last = time.Now()
					continue
				}
				w.q.stopGrown(w.h, &w.est)
				return
			}
			w.flush()
			w.lookHeld(n > 0)
			w.capFiles()
			w.repace()
			if start.over && w.est.files > w.walked.files {
				// A home far past its bound (more than a walk counts):
				// any entry the command adds is growth.
				w.tree.Load().freeze()
				cancel(errOverQuota)
				return
			}
			if held {
				w.holdBurst(w.est.files - before)
			}
			if held && !w.gated() && !w.pressed {
				w.tree.Load().thaw() // gated or pressed: stopped until the walk at the loop's top
			}
			if cpuHeld && !w.urgent() {
				w.letGo() // urgent: held until the walk at the loop's top confirms
			}
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				_ = w.f.Close() // not expected; walks alone from here
				w.f = nil
			}
			continue
		}
		if t == nil {
			t = time.NewTimer(time.Until(wake))
			defer t.Stop()
		} else {
			t.Reset(time.Until(wake))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.lookHeld(false)
		w.capFiles()
		w.repace()
	}
}

// How often held files are looked at: at most heldGap apart while events
// come, and at least every heldWake; and at once when the file system
// grew by heldGrowth more than the estimate did.
const (
	heldGap    = 2 * time.Millisecond
	heldWake   = 5 * time.Millisecond
	heldGrowth = 256 << 10
)

// lookHeld reads the files the command holds with no name again into the
// estimate (see follower.held): when an event asked, when events came
// (busy) and heldGap passed since the last look, or when the file
// system grew by more than the estimate explains.
func (w *follower) lookHeld(busy bool) {
	t := w.tree.Load()
	if t == nil || w.h.ownFS {
		return
	}
	fs := w.used()
	unexplained := fs >= 0 && w.heldFS > 0 && (fs-w.heldFS)-(w.est.bytes-w.heldEst) > heldGrowth
	if !w.heldNow && !unexplained && !(busy && time.Since(w.heldAt) >= heldGap) {
		return
	}
	h, sizes := t.heldBy(w.dev, false)
	w.est.bytes += h - w.held
	w.held, w.heldSizes = h, sizes
	w.heldAt, w.heldNow = time.Now(), false
	w.heldFS, w.heldEst = fs, w.est.bytes
}

// pressure stops the command for the rest of a walk when the events it
// queued meanwhile reach burstRead, or the file system grew by more than
// the home's room (fsGrew: writes no watch sees, deeper than the watched
// directories or in one the worker cannot read): a walk of a big home on
// a loaded host takes hundreds of milliseconds, in which a writer of
// empty files made thousands past the bound before the follower read any
// of them, and a writer of 1 MiB files tens of MiB.
// A command with a cgroup is held by its CPU bandwidth instead
// (holdCPU). (FIONREAD, spelled TIOCINQ in x/sys/unix, is the bytes an
// inotify instance holds queued.)
func (w *follower) pressure() {
	if w.f == nil || w.pressed {
		return
	}
	if n, err := unix.IoctlGetInt(int(w.f.Fd()), unix.TIOCINQ); err == nil && n >= burstRead || w.fsGrew() {
		w.pressed = w.tree.Load().hold() || w.holdCPU()
	}
}

// nearBound says whether the estimate passed the line below a bound, or
// a bound.
func (w *follower) nearBound() bool { return w.overLine() || w.q.isOver(&w.est) }

// tight says whether the home was at or over a bound when the command
// began: then any growth is past the bound, and the command is held to
// none (gated).
func (w *follower) tight() bool { return w.q.atBound(&w.start) }

// gated says whether the command, in a home at or over its bound when it
// began and held from userland (a tree), grew the estimate past the
// home's start: it is then stopped at once and a walk confirms, instead
// of after the walk's own cost (a shell makes hundreds of entries in the
// tens of milliseconds a walk of a full home takes on a loaded host).
func (w *follower) gated() bool {
	q, s, e := w.q, &w.start, &w.est
	return w.tree.Load() != nil && (q.files > 0 && s.files >= q.files && e.files > s.files || q.bytes > 0 && s.bytes >= q.bytes && e.bytes > s.bytes)
}

// grewPast says whether u, a home's usage, is more than start.
func grewPast(u, start *usage) bool {
	return u.bytes > start.bytes || u.files > start.files || u.over && !start.over
}

// register adds w, which follows a command stopped by cancel, to its
// home's running followers.
func (q *quotas) register(w *follower, cancel context.CancelCauseFunc) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.running[w.h.agent]
	if m == nil {
		m = map[*follower]context.CancelCauseFunc{}
		q.running[w.h.agent] = m
	}
	m[w] = cancel
}

// unregister removes w from its home's running followers.
func (q *quotas) unregister(w *follower) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.running[w.h.agent], w)
	if len(q.running[w.h.agent]) == 0 {
		delete(q.running, w.h.agent)
	}
}

// stopGrown stops, with errOverQuota, each command running in h whose
// home is now u (over the quota) and was less when it began.
func (q *quotas) stopGrown(h *home, u *usage) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for f, cancel := range q.running[h.agent] {
		if grewPast(u, &f.start) {
			f.tree.Load().freeze() // stopped at once; the kill follows
			cancel(errOverQuota)
		}
	}
}

// event updates the estimate with one inotify event: name (empty for an
// event on the directory itself) in the directory watched as wd.
func (w *follower) event(wd int32, mask uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.walkNow = true
		return
	}
	dir, ok := w.dirs[wd]
	if !ok {
		return
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(w.dirs, wd) // the directory is gone
		delete(w.watched, dir)
		return
	}
	if name == "" {
		return
	}
	rel := dir + "/" + name
	isDir := mask&unix.IN_ISDIR != 0
	switch {
	case mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
		w.est.files += w.counted(dir, name, false)
		if !isDir && mask&unix.IN_DELETE != 0 {
			w.heldNow = true // perhaps still open
		}
		if b, ok := w.sizes[rel]; ok {
			w.est.bytes -= b
			delete(w.sizes, rel)
		}
		if isDir && mask&unix.IN_MOVED_FROM != 0 {
			// Its watched subtree has new names: the walk watches it again.
			w.walkNow = true
			clear(w.watched)
		}
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		w.est.files += w.counted(dir, name, true)
		w.touched[rel] = true
		if isDir {
			if mask&unix.IN_MOVED_TO != 0 {
				w.walkNow = true
			} else if f, err := w.h.openDir(rel); err == nil {
				w.addWatch(rel, f)
				// What was made in it before the watch came counts too.
				if ents, err := f.ReadDir(256); err == nil {
					for _, e := range ents {
						w.event(wd, unix.IN_CREATE, name+"/"+e.Name())
					}
					if len(ents) == 256 {
						w.walkNow = true
					}
				}
				f.Close()
			}
		}
	case mask&(unix.IN_MODIFY|unix.IN_CLOSE_WRITE) != 0:
		w.touched[rel] = true
	case mask&unix.IN_ATTRIB != 0:
		// Perhaps extended attributes (also a chmod, a touch): what
		// they hold is looked at once the read's events are in.
		w.xtouched[rel] = true
	}
}

// counted is by how much an entry name made (made) or removed in dir
// changes the estimate's entries: see entrySet.
func (w *follower) counted(dir, name string, made bool) int64 {
	switch {
	case w.names == nil && made:
		return 1
	case w.names == nil:
		return -1
	case made:
		return w.names.made(dir, name)
	}
	return w.names.removed(dir, name)
}

// flush takes the entries the last events touched into the estimate.
func (w *follower) flush() {
	for rel := range w.touched {
		w.grew(rel)
	}
	clear(w.touched)
	for rel := range w.xtouched {
		w.xattrGrew(rel)
	}
	clear(w.xtouched)
}

// grew takes rel's blocks into the estimate: its growth since the last
// event that named it, or all of it.
func (w *follower) grew(rel string) {
	fi, err := w.h.root.Lstat(rel)
	if err != nil {
		// Written and gone: perhaps deleted and held open, or a file made
		// with O_TMPFILE (named "#<inode>" on tmpfs), which writes still
		// name.
		w.heldNow = true
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	b := st.Blocks * 512
	w.est.bytes += b - w.sizes[rel]
	if len(w.sizes) >= maxTrackedSize {
		clear(w.sizes) // later events count whole files: the estimate errs high
	}
	w.sizes[rel] = b
}

// parseEvents calls fn with each inotify event in b, a read's bytes; a
// short or malformed tail is left out.
func parseEvents(b []byte, fn func(wd int32, mask uint32, name string)) {
	const head = unix.SizeofInotifyEvent
	for len(b) >= head {
		wd := int32(binary.NativeEndian.Uint32(b[0:]))
		mask := binary.NativeEndian.Uint32(b[4:])
		n := binary.NativeEndian.Uint32(b[12:])
		if uint64(n) > uint64(len(b)-head) {
			return
		}
		name := b[head : head+int(n)]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		fn(wd, mask, string(name))
		b = b[head+int(n):]
	}
}

// Usage counts agentID's home as the quota does (for tests and
// operators).
func (c *Category) Usage(agentID string) (Usage, error) {
	h, err := c.homes.open(agentID)
	if err != nil {
		return Usage{}, err
	}
	defer h.close()
	q := c.homes.quota
	if q == nil {
		q = &quotas{use: map[string]*usage{}}
	}
	u := q.walk(h)
	return Usage{Bytes: u.bytes, Files: u.files, QuotaBytes: q.bytes, QuotaFiles: q.files}, nil
}
