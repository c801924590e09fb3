package brain

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
)

// index is one agent's corpus and the bucket revision it reflects. Its
// mutex serialises the refresh and the read that follows it.
type index struct {
	mu     sync.Mutex
	agent  string
	rev    uint64
	corpus *corpus
}

// refresh brings the corpus up to date: the first time with the last
// value of every page key of the agent, afterwards with every change
// after the revision seen last (the bucket keeps one value per key, so
// these are the current values and delete markers of changed pages).
// Call with ix.mu held.
func (ix *index) refresh(ctx context.Context, r bus.Retry, kv jetstream.KeyValue) error {
	// A watch that stalls or ends early is started again from the
	// revision reached.
	err := r.Watch(ctx, "reading the brain", func(ctx context.Context) (jetstream.KeyWatcher, error) {
		var opts []jetstream.WatchOpt
		if ix.rev > 0 {
			opts = append(opts, jetstream.IncludeHistory(), jetstream.ResumeFromRevision(ix.rev+1))
		}
		return kv.Watch(ctx, agentFilter(ix.agent), opts...)
	}, func(e jetstream.KeyValueEntry) error {
		ix.apply(e)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the brain: %w", err)
	}
	return nil
}

func (ix *index) apply(e jetstream.KeyValueEntry) {
	ix.rev = max(ix.rev, e.Revision())
	if e.Operation() != jetstream.KeyValuePut {
		ix.corpus.remove(e.Key())
		return
	}
	var p Page
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		// An unreadable value cannot be searched; get_page reports it.
		ix.corpus.remove(e.Key())
		return
	}
	ix.corpus.put(newDoc(e.Key(), &p))
}

// cache holds the indexes of the agents searched last on this worker,
// evicting the least recently used beyond a byte budget.
type cache struct {
	kv     jetstream.KeyValue
	retry  bus.Retry
	budget int

	mu    sync.Mutex
	lru   *list.List // of *cacheEntry, most recent first
	agent map[string]*list.Element
	bytes int
}

type cacheEntry struct {
	ix    *index
	bytes int
}

func newCache(kv jetstream.KeyValue, r bus.Retry, budget int) *cache {
	return &cache{kv: kv, retry: r, budget: budget, lru: list.New(), agent: map[string]*list.Element{}}
}

// with runs f on the agent's up-to-date corpus, holding its lock.
func (c *cache) with(ctx context.Context, agent string, f func(*corpus) error) error {
	c.mu.Lock()
	el, ok := c.agent[agent]
	if !ok {
		el = c.lru.PushFront(&cacheEntry{ix: &index{agent: agent, corpus: newCorpus()}})
		c.agent[agent] = el
	} else {
		c.lru.MoveToFront(el)
	}
	ix := el.Value.(*cacheEntry).ix
	c.mu.Unlock()

	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.refresh(ctx, c.retry, c.kv); err != nil {
		// A partial refresh leaves a corpus that is behind its revision:
		// start over next time.
		ix.rev, ix.corpus = 0, newCorpus()
		return err
	}
	c.account(el, ix.corpus.bytes)
	return f(ix.corpus)
}

// account records an entry's size and evicts others beyond the budget.
func (c *cache) account(el *list.Element, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := el.Value.(*cacheEntry)
	if _, live := c.agent[e.ix.agent]; !live {
		return // evicted meanwhile; it serves this call and is dropped
	}
	c.bytes += bytes - e.bytes
	e.bytes = bytes
	for c.bytes > c.budget && c.lru.Len() > 1 {
		last := c.lru.Back()
		if last == el {
			break
		}
		le := last.Value.(*cacheEntry)
		c.lru.Remove(last)
		delete(c.agent, le.ix.agent)
		c.bytes -= le.bytes
	}
}
