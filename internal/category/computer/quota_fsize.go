package computer

import (
	"slices"

	"golang.org/x/sys/unix"
)

// Files no name holds (deleted while open, made with O_TMPFILE) grow
// where no walk sees them, and each is bounded by the kernel only by the
// command's RLIMIT_FSIZE, the room its home had when it started: a
// writer of many of them at tmpfs speed (megabytes a millisecond) passed
// the bound by what it wrote while the worker, run late, looked. Within
// the last eighth of the bytes bound, the follower lowers the limit of
// every process of the command's tree to the room the estimate leaves,
// soft and hard (a command cannot raise it back), so that the kernel
// refuses (EFBIG, SIGXFSZ) any file growing past it however late the
// worker looks again. Only lowered: a worker that is not root cannot
// raise another process's hard limit.
//
// The limit is a size each file may reach, not what all of them may
// add: n such files, each below the room when it is set, could add up
// to n times the room (four of 2 MiB with 4 MiB left added 8 MiB). So
// the limit is also at most the level to which the files no name holds
// can all grow within the room (fillLevel).

// capFiles lowers the tree's RLIMIT_FSIZE to the room the estimate
// leaves in the last eighth of the bytes bound (nothing with no tree).
func (w *follower) capFiles() {
	t := w.tree.Load()
	q := w.q
	if t == nil || q.bytes <= 0 {
		return
	}
	room := q.bytes - w.est.bytes
	if room > q.bytes/8 {
		return
	}
	n := min(room, fillLevel(w.heldSizes, max(room, 0)))
	t.capFiles(max(n&^(quotaBlock-1), quotaBlock))
}

// fillLevel is the highest size L such that files of the given sizes,
// each grown to L, grow by room at most (room itself for no files).
func fillLevel(sizes []int64, room int64) int64 {
	if len(sizes) == 0 {
		return room
	}
	s := slices.Sorted(slices.Values(sizes))
	var below int64 // the sizes of the files the level covers
	for k, n := range s {
		below += n
		level := (room + below) / int64(k+1)
		if k == len(s)-1 || level <= s[k+1] {
			return level
		}
	}
	return room // not reached
}

// capFiles lowers every process's RLIMIT_FSIZE to n bytes, when n is
// below what it set last; processes a freeze finds later get it too.
func (p *procTree) capFiles(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.fsize > 0 && n >= p.fsize {
		return
	}
	p.fsize = n
	for pid, parent := range p.members() {
		// The pid is the one listed (not one reused since, perhaps by
		// another agent's process of the same user): its parent is the
		// one it was listed under. A stopped process (held) is checked.
		if _, held := p.held[pid]; !held {
			if _, pp := statOf(pid); pp != parent {
				continue
			}
		}
		p.capPid(pid)
	}
}

// capPid sets pid's RLIMIT_FSIZE to p.fsize (none set: nothing). A
// limit lower than it (the command's own) is left: raising fails
// without privilege, and is not tried. p.mu is held.
func (p *procTree) capPid(pid int) {
	if p.fsize <= 0 {
		return
	}
	var old unix.Rlimit
	if unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &old) != nil || old.Max <= uint64(p.fsize) {
		return
	}
	_ = unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: min(old.Cur, uint64(p.fsize)), Max: uint64(p.fsize)}, nil)
}
