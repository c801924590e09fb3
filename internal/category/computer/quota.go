package computer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbull/toolruntime/internal/tools"
)

// Defaults of the quota of each home.
const (
	DefaultHomeQuotaBytes = 1 << 30
	DefaultHomeQuotaFiles = 100_000
)

// usageTTL is how long a home's usage, counted by a walk of it, is taken
// as it is; the file tools add what they write meanwhile, and each
// command is followed by a walk. Other workers on a shared root change it
// too, so it is counted again after this long.
const usageTTL = 30 * time.Second

// quotas holds every home to a size on disk and a count of entries, by
// counting: a walk of the home (the blocks its files hold, and its files,
// directories and links) cached per agent, what the file tools write
// admitted against it before it is written, and a command stopped when a
// walk during it finds the home over. Nil: no quota.
type quotas struct {
	bytes, files int64 // each <= 0: that one is not bounded
	mu           sync.Mutex
	use          map[string]*usage // by agent id
}

// usage is a home's usage: bytes on disk and entries.
type usage struct {
	bytes, files int64
	at           time.Time
	// over: the walk stopped early, at more entries than the quota
	// allows; bytes is then a lower bound.
	over bool
}

func newQuotas(bytes, files int64) *quotas {
	if bytes <= 0 && files <= 0 {
		return nil
	}
	return &quotas{bytes: bytes, files: files, use: map[string]*usage{}}
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
	q.mu.Lock()
	q.use[h.agent] = u
	q.mu.Unlock()
	return u, q.isOver(u)
}

func (q *quotas) isOver(u *usage) bool {
	return q.bytes > 0 && u.bytes > q.bytes || q.files > 0 && (u.over || u.files > q.files)
}

// room is how many bytes h may still grow by (-1: unbounded).
func (q *quotas) room(h *home) int64 {
	if q == nil || q.bytes <= 0 {
		return -1
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return max(q.bytes-q.current(h).bytes, 0)
}

// overError is the model's error for a home at or over its quota.
func (q *quotas) overError(u *usage, adding int64, what string) error {
	return tools.Errorf(tools.ToolError, "Your home is over its disk quota: %s%s %s Delete files you no longer need (find them with run_command `du -a . | sort -n | tail`) and try again.",
		q.describe(u), addingNote(adding), what)
}

func addingNote(n int64) string {
	if n <= 0 {
		return "."
	}
	return fmt.Sprintf("; this write adds %s.", byteCount(n))
}

// describe says a usage against the quota: "1.0 GiB of 1.0 GiB on disk,
// 12 of 100000 files".
func (q *quotas) describe(u *usage) string {
	var s string
	if q.bytes > 0 {
		s = fmt.Sprintf("%s of the %s it may hold on disk", byteCount(u.bytes), byteCount(q.bytes))
	} else {
		s = byteCount(u.bytes) + " on disk"
	}
	files := fmt.Sprint(u.files)
	if u.over {
		files = "more than " + files
	}
	if q.files > 0 {
		return s + fmt.Sprintf(", %s of the %d files and directories it may hold", files, q.files)
	}
	return s + ", " + files + " files and directories"
}

// walk counts what h holds: the blocks of everything beneath it (what the
// disk gives it, so a sparse file costs what it holds) and every entry.
// It reads each directory in batches through the home's root and stops
// once there are more entries than the quota allows.
func (q *quotas) walk(h *home) *usage {
	u := &usage{at: time.Now()}
	limit := int64(-1)
	if q.files > 0 {
		limit = q.files
	}
	var walkDir func(rel string, depth int)
	walkDir = func(rel string, depth int) {
		f, err := h.openDir(rel)
		if err != nil {
			return
		}
		defer f.Close()
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) == nil {
			u.bytes += st.Blocks * 512
		}
		for !u.over {
			ents, err := f.ReadDir(1024)
			for _, e := range ents {
				u.files++
				if limit >= 0 && u.files > limit {
					u.over = true
					return
				}
				if e.IsDir() {
					if depth < maxPathDepth {
						walkDir(rel+"/"+e.Name(), depth+1)
					}
					continue
				}
				if unix.Fstatat(int(f.Fd()), e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
					u.bytes += st.Blocks * 512
				}
			}
			if err != nil || len(ents) == 0 { // io.EOF at the end
				return
			}
		}
	}
	walkDir(".", 0)
	return u
}

// errOverQuota stops a command whose home went over its quota.
var errOverQuota = errors.New("the home went over its disk quota")

// watch walks h while a command runs and cancels it (cause errOverQuota)
// once the home is over its quota and has grown since the command began:
// a command that deletes files in a home already over (rm) runs on. It
// walks every quarter second, less often when a walk takes long (at most
// one walk in five of the time). It returns when ctx ends.
func (q *quotas) watch(ctx context.Context, h *home, cancel context.CancelCauseFunc) {
	if q == nil {
		return
	}
	start := q.walk(h)
	wait := 250 * time.Millisecond
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		began := time.Now()
		u := q.walk(h)
		if q.isOver(u) && (u.bytes > start.bytes || u.files > start.files || u.over && !start.over) {
			q.mu.Lock()
			q.use[h.agent] = u
			q.mu.Unlock()
			cancel(errOverQuota)
			return
		}
		t.Reset(max(wait, 4*time.Since(began)))
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
