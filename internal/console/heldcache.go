package console

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/agentbull/toolruntime/protocol"
)

// A held step's record holds up to a message's worth of arguments (a
// MiB), and the list reads twenty of them a page: read, decoded and
// indented whole at every load, twenty such steps made /approvals read
// 20 MiB from NATS a load and take nine times as long as beside twenty
// small ones. What the list shows of a record is derived once per
// revision of it (listed), bounded to what a list may show, and kept for
// the next loads; a record is read again only when the watch of the
// approval records says it changed. A step's own page and a decision
// read the record whole, as before.

// listedPre is what the list needs of one revision of a held step's
// record, derived from all of it.
type listedPre struct {
	rev uint64
	// args are the calls' arguments as the list shows them at most
	// (argsShown each, until the calls before weigh a page): nil for a
	// call without valid arguments or past that bound, which the list
	// does not list.
	args []*shown
	// valid: the call's arguments validated; digests and scripts are its
	// decision digest and scriptNote; page is the step's pageDigest.
	valid            []bool
	digests, scripts []string
	page             string
}

// valid reports whether call i of h has valid arguments.
func (h *heldStep) valid(i int) bool {
	if h.pre != nil {
		return h.pre.valid[i]
	}
	return h.Calls[i].Valid != nil
}

func (h *heldStep) callDigest(i int) string {
	if h.pre != nil {
		return h.pre.digests[i]
	}
	return h.digest(h.Calls[i])
}

func (h *heldStep) script(i int) string {
	if h.pre != nil {
		return h.pre.scripts[i]
	}
	return scriptNote(h.Calls[i].Valid)
}

func (h *heldStep) shownDigest() string {
	if h.pre != nil {
		return h.pre.page
	}
	return pageDigest(h)
}

// prepare derives h's listedPre from its whole record, at revision rev,
// within a page's weight, and drops the arguments it holds.
func prepare(h *heldStep, rev uint64, page int) {
	p := &listedPre{rev: rev, page: pageDigest(h), args: make([]*shown, len(h.Calls)),
		valid: make([]bool, len(h.Calls)), digests: make([]string, len(h.Calls)), scripts: make([]string, len(h.Calls))}
	used := 0
	for i, c := range h.Calls {
		if c.Valid == nil {
			continue
		}
		p.valid[i], p.digests[i], p.scripts[i] = true, h.digest(c), scriptNote(c.Valid)
		if used < page {
			v := showJSON(c.Valid, argsShown)
			p.args[i] = &v
			used += callWeight + v.Cost
		}
		h.Calls[i].Valid = nil
	}
	h.pre = p
}

// listedCap bounds the records kept: a few pages' worth.
const listedCap = 4 * stepsPerPage

// listedCache keeps the prepared records of the held steps lately
// listed, by key.
type listedCache struct {
	mu sync.Mutex
	m  map[string]*heldStep
}

// listed is the record of key as the list shows it: kept while its
// revision is the one the watch saw last (rev), else read and prepared.
func (s *Server) listed(ctx context.Context, key string, rev uint64) (*heldStep, error) {
	s.held.mu.Lock()
	h := s.held.m[key]
	s.held.mu.Unlock()
	if h != nil && h.pre.rev >= rev {
		return h, nil
	}
	kv, err := s.js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	h = &heldStep{}
	if err := json.Unmarshal(e.Value(), h); err != nil {
		return nil, err
	}
	prepare(h, e.Revision(), s.bounds.page)
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	if s.held.m == nil {
		s.held.m = map[string]*heldStep{}
	}
	if _, ok := s.held.m[key]; !ok && len(s.held.m) >= listedCap {
		for k := range s.held.m { // any one: a bound, not a policy
			delete(s.held.m, k)
			break
		}
	}
	s.held.m[key] = h
	return h, nil
}

// clip is s as showText shows the same value within limit: what s
// shows when it weighs at most limit, else s cut where showText cuts.
// s must show the value as showText does within a limit at least
// limit (a prefix of its lines and segments); limit > 0.
func (s shown) clip(limit int) shown {
	if s.Cost <= limit {
		return s
	}
	return fitLines(len(s.Lines), func(i int) []seg { return s.Lines[i].Segs }, s.Total, limit)
}
