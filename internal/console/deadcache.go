package console

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

// A dead letter never changes once stored, and reading its headers
// again costs the server its whole payload again (a headers-only
// consumer still loads, copies and checksums each message whole): a
// flood of 900 KB letters made every load of /approvals and /dead pay
// for every letter it looked at. The console keeps what it read: the
// headers of the letters /dead lists (letterCache), and per set of turns
// what it found of their refused answers (refusedCache). Both start over
// when the stream's count of deleted messages changes (a letter it kept
// may be gone); letters below the stream's first sequence are never
// asked for again.

// letterCacheBytes bounds what letterCache keeps (headers and subjects),
// letterCacheLetters how many letters.
const (
	letterCacheBytes   = 8 << 20
	letterCacheLetters = 4096
)

type letterCache struct {
	mu      sync.Mutex
	deleted int
	m       map[uint64]*deadLetter // nil: the sequence holds no letter (deleted)
	order   []uint64               // first kept first
	bytes   int
}

func newLetterCache() *letterCache { return &letterCache{m: map[uint64]*deadLetter{}} }

func letterWeight(d *deadLetter) int {
	if d == nil {
		return 16
	}
	n := len(d.Subject) + 64
	for k, vs := range d.Headers {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// get returns the letter of sequence seq (nil: none, deleted) and
// whether it is known.
func (c *letterCache) get(seq uint64, deleted int) (*deadLetter, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted != deleted {
		c.reset(deleted)
		return nil, false
	}
	d, ok := c.m[seq]
	return d, ok
}

// fill keeps the letters a listing of sequences lo to hi-1 returned
// (got, oldest first, maybe some past hi); the sequences of the window
// it passed without a letter are kept as deleted.
func (c *letterCache) fill(lo, hi uint64, deleted int, got []deadLetter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted != deleted {
		c.reset(deleted)
	}
	passed := len(got) > 0 && got[len(got)-1].Seq >= hi-1
	seen := map[uint64]bool{}
	for i := range got {
		d := got[i]
		d.Data = nil
		seen[d.Seq] = true
		c.put(d.Seq, &d)
	}
	if passed {
		for seq := lo; seq < hi; seq++ {
			if !seen[seq] {
				c.put(seq, nil)
			}
		}
	}
}

// keep keeps letters a filtered listing returned: the sequences it
// passed are not known to hold nothing (they may be on other subjects).
func (c *letterCache) keep(got []deadLetter, deleted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted != deleted {
		c.reset(deleted)
	}
	for i := range got {
		d := got[i]
		d.Data = nil
		c.put(d.Seq, &d)
	}
}

func (c *letterCache) put(seq uint64, d *deadLetter) {
	if _, ok := c.m[seq]; ok {
		return
	}
	c.m[seq] = d
	c.order = append(c.order, seq)
	c.bytes += letterWeight(d)
	for len(c.order) > 0 && (c.bytes > letterCacheBytes || len(c.order) > letterCacheLetters) {
		old := c.order[0]
		c.order = c.order[1:]
		c.bytes -= letterWeight(c.m[old])
		delete(c.m, old)
	}
}

func (c *letterCache) reset(deleted int) {
	c.deleted, c.m, c.order, c.bytes = deleted, map[uint64]*deadLetter{}, nil, 0
}

// refusedCacheKeys bounds how many sets of turns refusedCache keeps.
const refusedCacheKeys = 512

// refusedCache keeps, per set of turn subjects, how far back TURN_DEAD
// was read for their refused answers and the answers found.
type refusedCache struct {
	mu sync.Mutex
	m  map[string]*refusedScan
}

func newRefusedCache() *refusedCache { return &refusedCache{m: map[string]*refusedScan{}} }

// refusedScan is what was read for one set of turns: the sequences lo to
// hi, and the letters among them that are answers. Its mutex is held for
// a whole read, so that ten pages loaded at once read the letters once.
type refusedScan struct {
	mu      sync.Mutex
	deleted int
	lo, hi  uint64 // read: lo to hi; hi 0 when nothing is
	// full: the byte bound stopped the last read at lo; nothing older is
	// read.
	full    bool
	answers []deadLetter
}

func (c *refusedCache) scan(filters []string) *refusedScan {
	key := strings.Join(slices.Sorted(slices.Values(filters)), " ")
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.m[key]
	if sc == nil {
		if len(c.m) >= refusedCacheKeys {
			for k := range c.m { // any one: a set of turns no page shows any more goes first, mostly
				delete(c.m, k)
				break
			}
		}
		sc = &refusedScan{}
		c.m[key] = sc
	}
	return sc
}

// isAnswer reports whether a dead letter is a refused answer;
// answerHeaders keeps only the headers refusedAnswers reads of it.
func isAnswer(d deadLetter) bool {
	subj := d.Headers.Get(protocol.HeaderDeadSubject)
	return strings.HasPrefix(subj, "turn.approval.") && strings.Count(subj, ".") == 3
}

func answerHeaders(d deadLetter) deadLetter {
	h := nats.Header{}
	for _, k := range []string{protocol.HeaderDeadSubject, protocol.HeaderDeadPrefix + "Nats-Msg-Id", protocol.HeaderDeadReason} {
		if v := d.Headers.Get(k); v != "" {
			h.Set(k, textclip.Ellipsis(v, maxShortShown))
		}
	}
	return deadLetter{Seq: d.Seq, Subject: d.Subject, Headers: h}
}

// readRefused reads the refused answers on the filters' subjects among
// sequences start to last, newest first, reading again only what the
// last read of the same filters did not: the letters stored since, and,
// while the byte bound allows, older ones.
func (s *Server) readRefused(ctx context.Context, filters []string, start, last uint64, deleted int) []deadLetter {
	sc := s.refused.scan(filters)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.deleted != deleted || sc.hi > last {
		// A letter read may be gone: start over (its mutex held).
		sc.deleted, sc.lo, sc.hi, sc.full, sc.answers = deleted, 0, 0, false, nil
	}
	keep := func(got []deadLetter) {
		for _, d := range got {
			if isAnswer(d) {
				sc.answers = append(sc.answers, answerHeaders(d))
			}
		}
	}
	read := 0
	if sc.hi == 0 {
		got, n, stopped := s.newestFirst(ctx, filters, start, last+1, refusedBytes, deleted)
		keep(got)
		read += n
		sc.lo, sc.hi, sc.full = stopped, last, stopped > start
	} else {
		if last > sc.hi {
			got, n, _ := s.newestFirst(ctx, filters, sc.hi+1, last+1, refusedBytes, deleted)
			keep(got)
			read += n
			sc.hi = last
		}
		if !sc.full && sc.lo > start && read < refusedBytes {
			got, _, stopped := s.newestFirst(ctx, filters, start, sc.lo, refusedBytes-read, deleted)
			keep(got)
			sc.lo, sc.full = stopped, stopped > start
		}
	}
	var out []deadLetter
	for _, d := range sc.answers {
		if d.Seq >= start {
			out = append(out, d)
		}
	}
	sc.answers = out // those past the window are never asked for again
	return slices.Clip(out)
}

// newestFirst reads the headers of the letters on the filters' subjects
// among sequences start to end-1, a window at a time from the newest,
// until budget bytes of headers are read; stopped is the lowest sequence
// its windows reached (start when they all were read).
// The letters read are kept for /dead too (letterCache): a letter read
// once for either is not read again for the other.
func (s *Server) newestFirst(ctx context.Context, filters []string, start, end uint64, budget, deleted int) (letters []deadLetter, read int, stopped uint64) {
	// Windows of 16 sequences, doubling up to refusedChunk: the newest
	// window's headers always fit the bound (16 of 64 KiB at most).
	chunk := uint64(16)
	stopped = end
	for stopped > start && read < budget {
		from := start
		if stopped > start+chunk {
			from = stopped - chunk
		}
		got, n, err := s.headersIn(ctx, filters, from, stopped, budget-read)
		s.letters.keep(got, deleted)
		letters = append(letters, got...)
		read += n
		if err != nil {
			s.log.Warn("console: reading the refused answers", "err", err)
			return letters, read, stopped
		}
		stopped = from
		chunk = min(2*chunk, refusedChunk)
	}
	return letters, read, stopped
}
