package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Defaults of Limits.
const (
	// DefaultPerKey is how many catalog requests of one fairness
	// key are built at once on a worker.
	DefaultPerKey = 4
	// DefaultTotal is how many catalog requests are built at once
	// on a worker, all keys together.
	DefaultTotal = 64
	// DefaultWaiting is how many catalog requests of one key may
	// wait for a slot; more are refused at once (503).
	DefaultWaiting = 256
)

// Limits bound the turn.tools requests one worker answers at once.
// Requests are answered concurrently, so that a catalog that is slow to
// build (an MCP server whose start takes seconds) delays only the
// requests that wait for it. The zero value of each field takes its
// default.
type Limits struct {
	// PerKey bounds the requests of one key (the request context's
	// fairness key, else its agent_id) built at once.
	PerKey int
	// Total bounds the requests built at once, all keys together.
	Total int
	// Waiting bounds the requests of one key waiting for a slot.
	Waiting int
}

// WithDefaults fills the zero fields.
func (l Limits) WithDefaults() Limits {
	if l.PerKey == 0 {
		l.PerKey = DefaultPerKey
	}
	if l.Total == 0 {
		l.Total = DefaultTotal
	}
	if l.Waiting == 0 {
		l.Waiting = DefaultWaiting
	}
	return l
}

// Validate checks the limits after defaults.
func (l Limits) Validate() error {
	l = l.WithDefaults()
	if l.PerKey < 1 || l.Total < 1 || l.Waiting < 1 {
		return fmt.Errorf("catalog limits must be at least 1 (per key %d, total %d, waiting per key %d)", l.PerKey, l.Total, l.Waiting)
	}
	return nil
}

// errBusy is returned by keyGate.acquire when a key has too many requests
// waiting.
var errBusy = errors.New("too many requests waiting")

// keyGate admits work per key: at most perKey of a key at once and at
// most total overall. Requests that must wait queue per key, in arrival
// order; whenever a slot frees, the keys with requests waiting take turns
// (round robin, in the order their first request began to wait), so that
// a key with a flood waiting cannot starve the others: each waiting key
// gets one of every n slots that free. One lock decides every grant, so
// the turns do not depend on which goroutine the scheduler runs first.
// Keys with nothing running or waiting are forgotten.
type keyGate struct {
	perKey, waiting, total int
	// maxAll bounds the requests running and waiting over every key, so
	// that many keys at once cannot hold unbounded memory either.
	maxAll int

	mu      sync.Mutex
	all     int // running and waiting
	running int
	keys    map[string]*gateKey
	turns   []*gateKey // keys with requests waiting, next turn first
}

type gateKey struct {
	key     string
	running int
	queue   []chan struct{} // waiting, first come first; closed when granted
}

func newKeyGate(l Limits) *keyGate {
	l = l.WithDefaults()
	return &keyGate{perKey: l.PerKey, waiting: l.Waiting, total: l.Total,
		maxAll: l.Total + 16*l.Waiting, keys: map[string]*gateKey{}}
}

// acquire waits for a slot of key; release must be called once when
// acquire returned nil. It fails with errBusy when the key already has
// perKey running and waiting waiting (or every key together maxAll),
// and with ctx's error when ctx ends first.
func (g *keyGate) acquire(ctx context.Context, key string) (release func(), err error) {
	g.mu.Lock()
	if g.all >= g.maxAll {
		g.mu.Unlock()
		return nil, errBusy
	}
	k := g.keys[key]
	if k == nil {
		k = &gateKey{key: key}
		g.keys[key] = k
	}
	if k.running+len(k.queue) >= g.perKey+g.waiting {
		g.mu.Unlock()
		return nil, errBusy
	}
	g.all++
	release = func() {
		g.mu.Lock()
		g.running--
		k.running--
		g.leave(k)
		g.grant()
		g.mu.Unlock()
	}
	// Queued, then granted at once if a slot is free for it: a request
	// never passes a waiting one that a free slot could take.
	ready := make(chan struct{})
	if len(k.queue) == 0 {
		g.turns = append(g.turns, k)
	}
	k.queue = append(k.queue, ready)
	g.grant()
	g.mu.Unlock()
	select {
	case <-ready:
		return release, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-ready: // granted meanwhile: handed on
		g.running--
		k.running--
		g.leave(k)
		g.grant()
		return nil, ctx.Err()
	default:
	}
	for i, c := range k.queue {
		if c == ready {
			k.queue = append(k.queue[:i], k.queue[i+1:]...)
			break
		}
	}
	if len(k.queue) == 0 {
		g.dropTurn(k)
	}
	g.leave(k)
	return nil, ctx.Err()
}

// grant hands free slots to waiting requests, a key at a time in turn.
// g.mu is held.
func (g *keyGate) grant() {
	for g.running < g.total {
		i := slices.IndexFunc(g.turns, func(k *gateKey) bool { return k.running < g.perKey })
		if i < 0 {
			return
		}
		k := g.turns[i]
		g.turns = append(g.turns[:i], g.turns[i+1:]...)
		close(k.queue[0])
		k.queue = k.queue[1:]
		g.running++
		k.running++
		if len(k.queue) > 0 {
			g.turns = append(g.turns, k) // its next turn comes after the others'
		}
	}
}

// dropTurn takes k out of the turns. g.mu is held.
func (g *keyGate) dropTurn(k *gateKey) {
	if i := slices.Index(g.turns, k); i >= 0 {
		g.turns = append(g.turns[:i], g.turns[i+1:]...)
	}
}

// leave counts one request of k gone and forgets k when it has none.
// g.mu is held.
func (g *keyGate) leave(k *gateKey) {
	g.all--
	if k.running == 0 && len(k.queue) == 0 {
		delete(g.keys, k.key)
	}
}
