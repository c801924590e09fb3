package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/internal/tokenvault"
)

// A server whose tokens are per owner cannot list its tools for an owner
// who has connected no account: the turn would lack its tools, and the
// model's call of one would name an unknown tool. So a list the server
// marked shareable (cacheScope "public", the default) is kept in the
// vault's bucket when any owner's session lists it, and an owner who
// cannot list gets those tools, whose calls end auth_required with the
// connect link (protocol 1.3): on every worker, and after a restart. A
// "private" list is never kept, nor offered to another owner.

// sharedList is what is kept of a shareable list.
type sharedList struct {
	Tools     []*sdk.Tool `json:"tools"`
	Namespace string      `json:"namespace"`
}

// shareList keeps a shareable list in the vault, once per new list, in
// the background (a listing does not wait for it).
func (s *server) shareList(list []*sdk.Tool, nsDesc string) {
	v := s.m.opts.Vault
	if v == nil || !s.cfg.OAuth.perOwner() {
		return
	}
	b, err := json.Marshal(sharedList{Tools: list, Namespace: nsDesc})
	if err != nil || len(b) > tokenvault.MaxRecord {
		return // too large to keep: unconnected owners get a note only
	}
	h := sha256.Sum256(b)
	s.buildMu.Lock()
	if s.keptList == h {
		s.buildMu.Unlock()
		return
	}
	s.keptList = h
	s.buildMu.Unlock()
	s.m.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.connectTimeout())
		defer cancel()
		if err := v.PutList(ctx, s.name, b); err != nil {
			s.log.Warn("mcp tool list not kept for unconnected owners", "err", err)
			s.buildMu.Lock()
			s.keptList = [sha256.Size]byte{}
			s.buildMu.Unlock()
		}
	})
}

// sharedTools are the tools of the list kept in the vault, nil when
// there is none.
func (s *server) sharedTools(ctx context.Context) (*toolSet, error) {
	v := s.m.opts.Vault
	if v == nil || !s.cfg.OAuth.perOwner() {
		return nil, nil
	}
	b, err := v.GetList(ctx, s.name)
	if err != nil || b == nil {
		return nil, err
	}
	var l sharedList
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("the kept tool list is unreadable: %w", err)
	}
	return s.build(l.Tools, nil, l.Namespace), nil
}
