package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"
)

// Defaults of CatalogLimits.
const (
	// DefaultCatalogPerKey is how many catalog requests of one fairness
	// key are built at once on a worker.
	DefaultCatalogPerKey = 4
	// DefaultCatalogTotal is how many catalog requests are built at once
	// on a worker, all keys together.
	DefaultCatalogTotal = 64
	// DefaultCatalogWaiting is how many catalog requests of one key may
	// wait for a slot; more are refused at once (503).
	DefaultCatalogWaiting = 256
)

// CatalogLimits bound the turn.tools requests one worker answers at once.
// Requests are answered concurrently, so that a catalog that is slow to
// build (an MCP server whose start takes seconds) delays only the
// requests that wait for it. The zero value of each field takes its
// default.
type CatalogLimits struct {
	// PerKey bounds the requests of one key (the request context's
	// fairness key, else its agent_id) built at once.
	PerKey int
	// Total bounds the requests built at once, all keys together.
	Total int
	// Waiting bounds the requests of one key waiting for a slot.
	Waiting int
}

// WithDefaults fills the zero fields.
func (l CatalogLimits) WithDefaults() CatalogLimits {
	if l.PerKey == 0 {
		l.PerKey = DefaultCatalogPerKey
	}
	if l.Total == 0 {
		l.Total = DefaultCatalogTotal
	}
	if l.Waiting == 0 {
		l.Waiting = DefaultCatalogWaiting
	}
	return l
}

// Validate checks the limits after defaults.
func (l CatalogLimits) Validate() error {
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
// most total overall, a key's work taking its key slot before it
// competes for a total slot. Both semaphores are FIFO, and no key has
// more than perKey waiters for the total slots, so a key with a flood
// waiting cannot starve the others: each key gets its turn in arrival
// order of the keys' heads. Keys with nothing running or waiting are
// forgotten.
type keyGate struct {
	perKey, waiting int64
	total           *semaphore.Weighted
	// maxAll bounds the requests running and waiting over every key, so
	// that many keys at once cannot hold unbounded memory either.
	maxAll int64

	mu   sync.Mutex
	all  int64
	keys map[string]*gateKey
}

type gateKey struct {
	sem  *semaphore.Weighted
	refs int64 // running and waiting
}

func newKeyGate(l CatalogLimits) *keyGate {
	l = l.WithDefaults()
	return &keyGate{perKey: int64(l.PerKey), waiting: int64(l.Waiting), total: semaphore.NewWeighted(int64(l.Total)),
		maxAll: int64(l.Total) + 16*int64(l.Waiting), keys: map[string]*gateKey{}}
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
		k = &gateKey{sem: semaphore.NewWeighted(g.perKey)}
		g.keys[key] = k
	}
	if k.refs >= g.perKey+g.waiting {
		g.mu.Unlock()
		return nil, errBusy
	}
	k.refs++
	g.all++
	g.mu.Unlock()
	leave := func() {
		g.mu.Lock()
		g.all--
		if k.refs--; k.refs == 0 {
			delete(g.keys, key)
		}
		g.mu.Unlock()
	}
	if err := k.sem.Acquire(ctx, 1); err != nil {
		leave()
		return nil, err
	}
	if err := g.total.Acquire(ctx, 1); err != nil {
		k.sem.Release(1)
		leave()
		return nil, err
	}
	return func() {
		g.total.Release(1)
		k.sem.Release(1)
		leave()
	}, nil
}
