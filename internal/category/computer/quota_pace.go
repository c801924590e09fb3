package computer

import "sync"

// Pacing: a command that grows its home fast is held, by its cgroup's
// CPU bandwidth, to a share of a core once the home is well into its
// quota, so that the kernel slows it however late the worker is to read
// its events (a loaded host leaves the worker unrun for tens of
// milliseconds, in which a shell makes thousands of empty files). The
// follower then stops it near the bound, not thousands of entries past.
// A command that grows its home little, or a home far from its bounds,
// is never paced; nor is one whose home is a file system of its own
// (QuotaKernel), which the kernel holds to its bounds however fast the
// command writes (ENOSPC), unless the disk the homes share runs low.
const (
	paceHalf  = 0.5  // cores, from an eighth of a bound
	paceTenth = 0.1  // cores, from a quarter of it
	paceOver  = 0.02 // cores, in a home over a bound when the command starts
	// paceHold is the least share a command with a cgroup is held to
	// while its follower is behind (see follower.holdCPU): a millisecond
	// a second, as near a stop as CPU bandwidth goes. A home with room
	// to spare is held less hard (holdShare), up to paceTenth.
	paceHold = 0.001
	// holdRoomBytes and holdRoomFiles are the room a home must have
	// left on both counts for a command held while its follower is
	// behind to keep paceTenth instead of paceHold: in a second of lag a
	// tenth of a core writes some 200 MB at tmpfs speed, or makes 5,000
	// empty files, well under either. The estimator's attacks run in
	// homes of a few MiB or thousands of entries, held at paceHold (at a
	// share in proportion to the room, four writers of empty files ended
	// 1,004 entries past a home of 5,000).
	holdRoomBytes = 512 << 20
	holdRoomFiles = 20_000
)

// holdShare is the share of a core a command is held to while its
// follower is behind: paceTenth in a home with room to spare on both
// counts, else paceHold. An untar of 41,600 files (1,600 directories,
// tmpfs, a 1 GiB home) took 1.7 s before holds, 2.7 to 5.0 s held at
// paceHold throughout, 2.0 to 2.5 s at paceTenth.
func (w *follower) holdShare() float64 {
	if b := w.q.bytes; b > 0 && b-w.est.bytes < holdRoomBytes {
		return paceHold
	}
	if f := w.q.files; f > 0 && f-w.est.files < holdRoomFiles {
		return paceHold
	}
	return paceTenth
}

// pacer holds a command to a share of a core (0: its own limit again);
// set once the command's sandbox has started (see follower.setPacer).
type pacer func(cores float64) error

// pace is the follower's pacing state.
type pace struct {
	mu     sync.Mutex
	fn     pacer
	cores  float64 // what the estimate calls for (0: not paced)
	broken bool    // the pacer failed: no cgroup, no cpu controller
	// held: the follower holds the command at paceHold (holdCPU) until
	// it has caught up; cores is set again when it lets it go.
	held bool
}

// setPacer gives w the command's pacer, once its sandbox has started.
//
// A home already over a bound, or near one, when the command starts is
// paced at once, for the whole command (startPace): the command may free
// space (rm runs, more slowly), and a writer of entries is stopped by the
// follower's first look, not thousands of entries later.
func (w *follower) setPacer(fn pacer) {
	if w == nil {
		return
	}
	w.pace.mu.Lock()
	defer w.pace.mu.Unlock()
	w.pace.fn = fn
	if c := w.startPace(); c > 0 && w.pace.cores == 0 {
		if err := fn(c); err != nil {
			w.pace.broken = true
			return
		}
		w.pace.cores = c
	}
}

// startPace is the pace a command gets from its start (0: none): a
// fiftieth of a core in a home over a bound, a tenth in one within the
// last eighth of a bound (the follower's first walk of a big home takes
// long enough for a writer to pass the bound at full speed).
func (w *follower) startPace() float64 {
	q, s := w.q, &w.start
	switch {
	case w.kernelHeld():
		return 0
	case w.tree.Load() != nil && w.tight():
		// Held from userland in a home at or over its bound: stopped
		// at each read of its events and at its first growth (gated),
		// and SCHED_IDLE in a group at nice 19 from its start; a duty
		// cycle would only slow the rm that frees the home.
		return 0
	case q.isOver(s):
		return paceOver
	case q.files > 0 && s.files >= q.files-q.files/8, q.bytes > 0 && s.bytes >= q.bytes-q.bytes/8:
		return paceTenth
	}
	return 0
}

// kernelHeld says whether the home is a file system of its own, which
// the kernel holds to its bounds.
func (w *follower) kernelHeld() bool { return w.h != nil && w.h.ownFS }

// paced says whether the command is paced now (for tests: the share).
func (w *follower) paced() float64 {
	w.pace.mu.Lock()
	defer w.pace.mu.Unlock()
	return w.pace.cores
}

// paceFor is the share of a core the estimate calls for (0: none): the
// command grew its home by a sixteenth of a bound (or a quarter of the
// room it had) and the home holds an eighth of it (half a core), or a
// quarter of it (a tenth); the home was over or near a bound when the
// command started (startPace); or the command grew its home while the
// disk the homes share is below four times its reserve (a tenth). A
// home the kernel holds (kernelHeld) is paced for the disk alone.
func (w *follower) paceFor() float64 {
	q := w.q
	if c := w.startPace(); c > 0 {
		return c
	}
	level := func(est, start, bound int64) float64 {
		// A sixteenth of the bound, or a quarter of the room the home
		// had when the command started, whichever is less: a writer in
		// a home near its bound is paced before it could pass it. The
		// kernel holds its own file system's bounds.
		if bound <= 0 || w.kernelHeld() || est-start < min(bound/16, max(bound-start, 0)/4) {
			return 0
		}
		switch {
		case est >= bound/4:
			return paceTenth
		case est >= bound/8:
			return paceHalf
		}
		return 0
	}
	cores := 0.0
	for _, c := range []float64{level(w.est.files, w.start.files, q.files), level(w.est.bytes, w.start.bytes, q.bytes)} {
		if c > 0 && (cores == 0 || c < cores) {
			cores = c
		}
	}
	if q.reserve > 0 && w.est.bytes-w.start.bytes > reserveGrowth {
		if d, ok := q.free(); ok && d.bytes < 4*q.reserve {
			cores = paceTenth
		}
	}
	return cores
}

// repace sets the command's pace to what the estimate calls for, when it
// changed.
func (w *follower) repace() {
	want := w.paceFor()
	w.pace.mu.Lock()
	defer w.pace.mu.Unlock()
	if w.pace.fn == nil || w.pace.broken || want == w.pace.cores {
		return
	}
	if w.pace.held {
		w.pace.cores = want // set when it is let go
		return
	}
	if err := w.pace.fn(want); err != nil {
		w.pace.broken = true
		return
	}
	w.pace.cores = want
}

// holdCPU holds a command that has a cgroup (no process tree: that one
// is stopped instead) at holdShare (never above its pace) while its
// follower is behind it: a
// read of a burst of events (burstRead), a walk under pressure, a walk
// that confirms a stop. A cgroup's pacing alone came too late there: a
// follower taking in the creation of 600 directories (a watch and a
// listing each) took half a second under -race on a loaded host, and its
// walk of 1,500 directories another half, while a writer of 1 MiB files
// it had not yet seen wrote at full speed, 44 to 122 MiB into a home of
// 8. A home the kernel holds (kernelHeld) is not held. It says whether
// it held it (letGo lets it go).
func (w *follower) holdCPU() bool {
	if w == nil || w.tree.Load() != nil || w.kernelHeld() {
		return false
	}
	w.pace.mu.Lock()
	defer w.pace.mu.Unlock()
	if w.pace.fn == nil || w.pace.broken || w.pace.held {
		return false
	}
	share := w.holdShare()
	if w.pace.cores > 0 {
		share = min(share, w.pace.cores)
	}
	if err := w.pace.fn(share); err != nil {
		w.pace.broken = true
		return false
	}
	w.pace.held = true
	return true
}

// letGo sets the pace the estimate calls for again, after holdCPU.
func (w *follower) letGo() {
	w.pace.mu.Lock()
	defer w.pace.mu.Unlock()
	if !w.pace.held {
		return
	}
	w.pace.held = false
	if err := w.pace.fn(w.pace.cores); err != nil {
		w.pace.broken = true
	}
}
