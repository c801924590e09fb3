package tokenvault

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// MaxNote bounds a note.
const MaxNote = 16 << 10

// A note is what a worker learnt when a server refused an owner's
// request (its WWW-Authenticate challenge, a count of step-ups): no
// secret, so it is stored as given, beside the owner's token.
func noteKey(server, owner string) string {
	h := sha256.Sum256([]byte(owner))
	return "c." + server + "." + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:20])
}

// PutNote stores owner's note for server.
func (v *Vault) PutNote(ctx context.Context, server, owner string, note []byte) error {
	if err := checkServer(server); err != nil {
		return err
	}
	if len(note) > MaxNote {
		return fmt.Errorf("tokenvault: a note of %d bytes is over %d", len(note), MaxNote)
	}
	if _, err := v.kv.Put(ctx, noteKey(server, owner), note); err != nil {
		return fmt.Errorf("tokenvault: %w", err)
	}
	return nil
}

// GetNote returns owner's note for server, nil when there is none.
func (v *Vault) GetNote(ctx context.Context, server, owner string) ([]byte, error) {
	if err := checkServer(server); err != nil {
		return nil, err
	}
	e, err := v.kv.Get(ctx, noteKey(server, owner))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenvault: %w", err)
	}
	if len(e.Value()) > MaxNote {
		return nil, errors.New("tokenvault: note too large")
	}
	return e.Value(), nil
}

// DeleteNote forgets owner's note for server.
func (v *Vault) DeleteNote(ctx context.Context, server, owner string) error {
	if err := checkServer(server); err != nil {
		return err
	}
	if err := v.kv.Delete(ctx, noteKey(server, owner)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("tokenvault: %w", err)
	}
	return nil
}
