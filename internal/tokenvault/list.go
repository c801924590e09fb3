package tokenvault

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// A server's tool list, as one owner's session listed it, kept for the
// workers whose owners cannot list it yet (no account connected): with
// it, their calls of its tools end "authorization needed" instead of
// naming an unknown tool. Only a list the server marked shareable
// ("public") is kept; it holds no secret, so it is stored as given.
func listKey(server string) string { return "l." + server }

// PutList stores server's shareable tool list (at most MaxRecord bytes).
func (v *Vault) PutList(ctx context.Context, server string, list []byte) error {
	if err := checkServer(server); err != nil {
		return err
	}
	if len(list) > MaxRecord {
		return fmt.Errorf("tokenvault: a tool list of %d bytes is over %d", len(list), MaxRecord)
	}
	if _, err := v.kv.Put(ctx, listKey(server), list); err != nil {
		return fmt.Errorf("tokenvault: %w", err)
	}
	return nil
}

// GetList returns server's stored tool list, nil when there is none.
func (v *Vault) GetList(ctx context.Context, server string) ([]byte, error) {
	if err := checkServer(server); err != nil {
		return nil, err
	}
	e, err := v.kv.Get(ctx, listKey(server))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenvault: %w", err)
	}
	if len(e.Value()) > MaxRecord {
		return nil, errors.New("tokenvault: tool list too large")
	}
	return e.Value(), nil
}
