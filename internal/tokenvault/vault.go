package tokenvault

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/chacha20poly1305"
)

// DefaultBucket is the KV bucket of the tokens.
const DefaultBucket = "MCP_TOKENS"

// MaxRecord bounds a stored record: a larger one is refused as damaged.
const MaxRecord = 64 << 10

// ErrNoToken is returned when the owner holds no token for the server, or
// only one that expired and cannot be refreshed: a person must connect
// the account.
var ErrNoToken = errors.New("no token")

// Token is what the vault keeps of one grant: the token, and what
// refreshing it needs.
type Token struct {
	AccessToken  string    `json:"access_token"`
	TokenType    string    `json:"token_type,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Scopes are the scopes granted, kept for a later step-up.
	Scopes []string `json:"scopes,omitempty"`
	// TokenURL, ClientID, ClientSecret and AuthStyle (oauth2.AuthStyle)
	// are the client the token was granted to, for refreshing; Resource
	// the RFC 8707 resource it was granted for; Issuer its authorization
	// server.
	TokenURL     string `json:"token_url,omitempty"`
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	AuthStyle    int    `json:"auth_style,omitempty"`
	Resource     string `json:"resource,omitempty"`
	Issuer       string `json:"issuer,omitempty"`
}

// Valid reports whether the token can be used for at least margin more.
func (t *Token) Valid(now time.Time, margin time.Duration) bool {
	return t != nil && t.AccessToken != "" && (t.Expiry.IsZero() || t.Expiry.After(now.Add(margin)))
}

// record is a KV value: the sealed token and the refresh lease, which is
// not secret.
type record struct {
	V          int    `json:"v"`
	KeyID      string `json:"kid"`
	Nonce      []byte `json:"n"`
	Sealed     []byte `json:"c"`
	LeaseBy    string `json:"lease_by,omitempty"`
	LeaseUntil int64  `json:"lease_until,omitempty"` // unix ms
}

// Options tune Open.
type Options struct {
	// Bucket defaults to DefaultBucket; Replicas to 1.
	Bucket   string
	Replicas int
	// WorkerID names this process in refresh leases.
	WorkerID string
	// Lease bounds one refresh (default 30s): a worker that took the
	// lease and died holds the record no longer.
	Lease time.Duration
	// Margin is how long before its expiry a token is refreshed
	// (default 60s).
	Margin time.Duration
}

// Vault is the token store. It is safe for concurrent use.
type Vault struct {
	kv   jetstream.KeyValue
	keys *Keyring
	opts Options
}

// Open creates or opens the bucket.
func Open(ctx context.Context, js jetstream.JetStream, keys *Keyring, opts Options) (*Vault, error) {
	if keys == nil {
		return nil, errors.New("tokenvault: no keyring")
	}
	if opts.Bucket == "" {
		opts.Bucket = DefaultBucket
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Margin <= 0 {
		opts.Margin = time.Minute
	}
	if opts.WorkerID == "" {
		opts.WorkerID = rand.Text()
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: opts.Bucket, Description: "Sealed OAuth tokens of MCP servers", History: 1,
		Replicas: opts.Replicas, MaxValueSize: MaxRecord})
	if err != nil {
		return nil, fmt.Errorf("tokenvault: bucket %s: %w", opts.Bucket, err)
	}
	return &Vault{kv: kv, keys: keys, opts: opts}, nil
}

var validServer = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Key is the KV key of owner's token for server: the owner is hashed, so
// that any owner string makes a valid key and the bucket's keys name no
// tenant.
func Key(server, owner string) string {
	h := sha256.Sum256([]byte(owner))
	return "t." + server + "." + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:20])
}

func checkServer(server string) error {
	if !validServer.MatchString(server) {
		return fmt.Errorf("tokenvault: server name %q is not 1-64 characters of [a-zA-Z0-9_-]", server)
	}
	return nil
}

// seal encodes tok sealed under the keyring's sealing key for key.
func (v *Vault) seal(key string, tok *Token, lease *record) ([]byte, error) {
	plain, err := json.Marshal(tok)
	if err != nil {
		return nil, err
	}
	a := v.keys.aeads[v.keys.sealID]
	nonce := make([]byte, chacha20poly1305.NonceSizeX)
	_, _ = rand.Read(nonce)
	r := record{V: 1, KeyID: v.keys.sealID, Nonce: nonce, Sealed: a.Seal(nil, nonce, plain, ad(key, v.keys.sealID))}
	if lease != nil {
		r.LeaseBy, r.LeaseUntil = lease.LeaseBy, lease.LeaseUntil
	}
	return json.Marshal(r)
}

func ad(key, kid string) []byte { return []byte("tokenvault/v1\x00" + key + "\x00" + kid) }

// decodeRecord parses a stored value (untrusted: anyone with write access
// to the bucket could have put it there).
func decodeRecord(data []byte) (*record, error) {
	if len(data) > MaxRecord {
		return nil, errors.New("record too large")
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if r.V != 1 || len(r.Nonce) != chacha20poly1305.NonceSizeX || len(r.Sealed) < chacha20poly1305.Overhead {
		return nil, errors.New("record: not a version 1 sealed token")
	}
	return &r, nil
}

// open unseals r stored under key.
func (k *Keyring) open(key string, r *record) (*Token, error) {
	a, ok := k.aeads[r.KeyID]
	if !ok {
		return nil, fmt.Errorf("record sealed with key %q, which this keyring lacks", r.KeyID)
	}
	plain, err := a.Open(nil, r.Nonce, r.Sealed, ad(key, r.KeyID))
	if err != nil {
		return nil, errors.New("record does not open: wrong key, or not this owner's")
	}
	var t Token
	if err := json.Unmarshal(plain, &t); err != nil {
		return nil, fmt.Errorf("sealed token: %w", err)
	}
	return &t, nil
}

// Get returns owner's token for server and its revision; ErrNoToken when
// there is none.
func (v *Vault) Get(ctx context.Context, server, owner string) (*Token, uint64, error) {
	t, _, rev, err := v.get(ctx, server, owner)
	return t, rev, err
}

func (v *Vault) get(ctx context.Context, server, owner string) (*Token, *record, uint64, error) {
	if err := checkServer(server); err != nil {
		return nil, nil, 0, err
	}
	key := Key(server, owner)
	e, err := v.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil, 0, ErrNoToken
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("tokenvault: %w", err)
	}
	r, err := decodeRecord(e.Value())
	if err != nil {
		return nil, nil, 0, fmt.Errorf("tokenvault: %s: %w", key, err)
	}
	t, err := v.keys.open(key, r)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("tokenvault: %s: %w", key, err)
	}
	return t, r, e.Revision(), nil
}

// Put stores owner's token for server, replacing any.
func (v *Vault) Put(ctx context.Context, server, owner string, tok *Token) error {
	if err := checkServer(server); err != nil {
		return err
	}
	key := Key(server, owner)
	data, err := v.seal(key, tok, nil)
	if err != nil {
		return err
	}
	if _, err := v.kv.Put(ctx, key, data); err != nil {
		return fmt.Errorf("tokenvault: %w", err)
	}
	return nil
}

// Delete forgets owner's token for server.
func (v *Vault) Delete(ctx context.Context, server, owner string) error {
	if err := checkServer(server); err != nil {
		return err
	}
	if err := v.kv.Delete(ctx, Key(server, owner)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("tokenvault: %w", err)
	}
	return nil
}

// Refresher exchanges a token's refresh token for a new token; it is
// called by one worker at a time per record.
type Refresher func(ctx context.Context, old *Token) (*Token, error)

// Fresh returns owner's token for server, valid for at least the
// vault's margin: refreshed with refresh when it is not, by exactly one
// worker (the one whose compare-and-set took the record's lease; the
// others wait for its result). ErrNoToken when there is no token, or an
// expired one without a refresh token; a failed refresh returns
// refresh's error, wrapped.
func (v *Vault) Fresh(ctx context.Context, server, owner string, refresh Refresher) (*Token, error) {
	key := Key(server, owner)
	for {
		tok, r, rev, err := v.get(ctx, server, owner)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		if tok.Valid(now, v.opts.Margin) {
			return tok, nil
		}
		if tok.RefreshToken == "" || refresh == nil {
			if tok.Valid(now, 0) {
				return tok, nil // it still works, for a little while
			}
			return nil, ErrNoToken
		}
		if r.LeaseUntil > now.UnixMilli() && r.LeaseBy != v.opts.WorkerID {
			// Another worker is refreshing: wait for its revision.
			if err := v.waitChange(ctx, key, rev, time.UnixMilli(r.LeaseUntil)); err != nil {
				return nil, err
			}
			continue
		}
		lease := &record{LeaseBy: v.opts.WorkerID, LeaseUntil: now.Add(v.opts.Lease).UnixMilli()}
		data, err := v.seal(key, tok, lease)
		if err != nil {
			return nil, err
		}
		leased, err := v.kv.Update(ctx, key, data, rev)
		if err != nil {
			if isCASFailure(err) {
				continue // another worker got there first
			}
			return nil, fmt.Errorf("tokenvault: %w", err)
		}
		rctx, cancel := context.WithTimeout(ctx, v.opts.Lease)
		nt, rerr := refresh(rctx, tok)
		cancel()
		if rerr != nil {
			// Give the lease back, keeping the old token: another attempt
			// (or a person) may still do better.
			if back, err := v.seal(key, tok, nil); err == nil {
				_, _ = v.kv.Update(context.WithoutCancel(ctx), key, back, leased)
			}
			if tok.Valid(time.Now(), 0) {
				return tok, nil
			}
			return nil, fmt.Errorf("refreshing the token: %w", rerr)
		}
		carry(nt, tok)
		data, err = v.seal(key, nt, nil)
		if err != nil {
			return nil, err
		}
		if _, err := v.kv.Update(context.WithoutCancel(ctx), key, data, leased); err != nil {
			// The record was deleted (a disconnect) while refreshing: the
			// person meant it; do not bring the token back.
			return nil, fmt.Errorf("%w: the token changed while it was refreshed: %v", ErrNoToken, err)
		}
		return nt, nil
	}
}

// carry keeps what a refresh response leaves out.
func carry(nt, old *Token) {
	if nt.RefreshToken == "" {
		nt.RefreshToken = old.RefreshToken
	}
	if len(nt.Scopes) == 0 {
		nt.Scopes = old.Scopes
	}
	if nt.TokenURL == "" {
		nt.TokenURL, nt.ClientID, nt.ClientSecret, nt.AuthStyle = old.TokenURL, old.ClientID, old.ClientSecret, old.AuthStyle
	}
	if nt.Resource == "" {
		nt.Resource = old.Resource
	}
	if nt.Issuer == "" {
		nt.Issuer = old.Issuer
	}
}

func isCASFailure(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) || (errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
}

// waitChange waits until key moves past rev, or until (the lease's end).
func (v *Vault) waitChange(ctx context.Context, key string, rev uint64, until time.Time) error {
	w, err := v.kv.Watch(ctx, key, jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("tokenvault: %w", err)
	}
	defer func() { _ = w.Stop() }()
	t := time.NewTimer(max(time.Until(until), 10*time.Millisecond))
	defer t.Stop()
	// The change may have landed before the watch began.
	if e, err := v.kv.Get(ctx, key); err != nil || e.Revision() != rev {
		return nil
	}
	for {
		select {
		case e := <-w.Updates():
			if e == nil || e.Revision() != rev {
				return nil
			}
		case <-t.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
