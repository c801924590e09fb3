package computer

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A walk counts the extended attributes of every entry, and reading them
// was the larger part of a walk's cost: a llistxattr through
// /proc/self/fd per entry, more than the lstat beside it. A home of
// 40,000 entries (a node_modules) took some 0.4 s a walk, and every
// command walks its home at its start and again at its end, so that even
// `true` took 0.9 s there.
//
// Attributes change only with the entry's ctime: setting or removing one
// sets it, as does anything that changes the inode, and no call sets a
// ctime back. So a walk keeps, for each entry it read (by device and
// inode), its ctime and what its attributes held, and the next walk of
// that home reads again only the entries whose ctime differs: new ones,
// changed ones, another file on a reused inode (made later, so with a
// later ctime). An entry whose ctime is within xattrRacy of the walk's
// start is not kept: a change in the same tick of a coarse clock (or the
// same second, where the file system keeps seconds) would leave its ctime
// as it was. Commands cannot set attributes at all (the sandbox refuses
// them); what the cache saves is the reads.

const (
	// xattrRacy is how recent a ctime is not taken as final: more than
	// the coarsest timestamp granularity of a local file system (ext4 with
	// 128-byte inodes keeps seconds).
	xattrRacy = 2500 * time.Millisecond
	// xattrMinEntries: homes of fewer entries are cheap to read whole and
	// are not kept.
	xattrMinEntries = 1024
	// xattrMaxEntries bounds what the cache keeps, all homes together
	// (some 40 bytes each): the homes used least recently go first.
	xattrMaxEntries = 1 << 19
)

// xattrKey is an entry: its device and inode.
type xattrKey struct{ dev, ino uint64 }

// xattrSeen is what a walk read of one entry: its ctime (ns) and the
// bytes of its attributes.
type xattrSeen struct {
	ctime int64
	bytes int64
}

// xattrCache is what the last walk of each of the biggest homes read of
// their attributes, by agent. The zero value is ready to use.
type xattrCache struct {
	mu    sync.Mutex
	homes map[string]*xattrHome
	total int // entries kept, all homes together
	// racy is xattrRacy (0), or shorter in tests.
	racy time.Duration
	// reads counts the attribute reads of every walk (for tests).
	reads atomic.Int64
}

// xattrHome is one home's last walk: seen is never changed once kept (a
// walk reads it while another may replace it).
type xattrHome struct {
	seen map[xattrKey]xattrSeen
	used time.Time
}

// xattrWalk is one walk's use of the cache: what the last walk kept, and
// what this one keeps.
type xattrWalk struct {
	prev   map[xattrKey]xattrSeen
	next   map[xattrKey]xattrSeen
	at     time.Time // the walk's start
	cutoff int64     // ctimes before it are final
	reads  *atomic.Int64
}

// begin starts a walk of agent's home at at.
func (c *xattrCache) begin(agent string, at time.Time) *xattrWalk {
	racy := c.racy
	if racy == 0 {
		racy = xattrRacy
	}
	w := &xattrWalk{at: at, cutoff: at.Add(-racy).UnixNano(), reads: &c.reads}
	c.mu.Lock()
	if h := c.homes[agent]; h != nil {
		w.prev = h.seen
		h.used = at
	}
	c.mu.Unlock()
	w.next = make(map[xattrKey]xattrSeen, len(w.prev))
	return w
}

// bytes is the size of the attributes of the entry st describes: what the
// last walk read of it when its ctime is the same, else read().
func (w *xattrWalk) bytes(st *unix.Stat_t, read func() int64) int64 {
	if w == nil {
		return read()
	}
	k := xattrKey{dev: st.Dev, ino: st.Ino}
	ct := st.Ctim.Nano()
	if s, ok := w.prev[k]; ok && s.ctime == ct {
		w.keep(k, s)
		return s.bytes
	}
	b := read()
	w.reads.Add(1)
	if ct < w.cutoff {
		w.keep(k, xattrSeen{ctime: ct, bytes: b})
	}
	return b
}

func (w *xattrWalk) keep(k xattrKey, s xattrSeen) {
	if len(w.next) < xattrMaxEntries {
		w.next[k] = s
	}
}

// end keeps what a walk of agent's home read, if the home is big enough
// to be worth it (and forgets the home otherwise). A walk that stopped
// early (usage.over) keeps what it read: each entry stands on its own.
func (c *xattrCache) end(agent string, w *xattrWalk) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.homes[agent]; old != nil {
		c.total -= len(old.seen)
		delete(c.homes, agent)
	}
	if len(w.next) < xattrMinEntries {
		return
	}
	for c.total+len(w.next) > xattrMaxEntries && len(c.homes) > 0 {
		var lru string
		var at time.Time
		for a, h := range c.homes {
			if lru == "" || h.used.Before(at) {
				lru, at = a, h.used
			}
		}
		c.total -= len(c.homes[lru].seen)
		delete(c.homes, lru)
	}
	if c.homes == nil {
		c.homes = map[string]*xattrHome{}
	}
	c.homes[agent] = &xattrHome{seen: w.next, used: w.at}
	c.total += len(w.next)
}
