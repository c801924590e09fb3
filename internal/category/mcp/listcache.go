package mcp

import (
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A session's tool list is kept until the server says it changed
// (tools/list_changed, which the SDK's own cache also honours) and, for a
// server of 2026-07-28 or later, no longer than the list's ttlMs (0: read
// it again for every turn). Older servers send no ttlMs: their list is
// kept until it changes, as before. The SDK keeps the pages themselves
// for their ttlMs.
//
// cacheScope "private" marks a list as its credential owner's: it is kept
// on the session of that owner only (a session is one identity's), and a
// private list is never offered to a turn from memory when the server
// cannot be reached, since that turn may be another owner's. "public"
// (the default) lists are shared by every turn on the session, and are
// offered from memory while the server is down.

// firstCacheableVersion is the protocol version from which ttlMs and
// cacheScope are part of list results.
const firstCacheableVersion = "2026-07-28"

// listCache is how long a session's tool list is good for.
type listCache struct {
	at      time.Time
	ttl     time.Duration
	expires bool // the server gives the list a time to live
	private bool
}

// cacheOf reads the caching fields of a list's first page, as the
// session's protocol version defines them.
func cacheOf(cs *sdk.ClientSession, c sdk.Cacheable, now time.Time) listCache {
	lc := listCache{at: now, private: c.CacheScope == "private"}
	if init := cs.InitializeResult(); init != nil && init.ProtocolVersion >= firstCacheableVersion {
		lc.expires, lc.ttl = true, time.Duration(max(c.TTLMs, 0))*time.Millisecond
	}
	return lc
}

// fresh reports whether the list may still be used at now.
func (lc listCache) fresh(now time.Time) bool {
	return !lc.expires || now.Sub(lc.at) < lc.ttl
}
