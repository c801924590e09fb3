package tokenvault_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/tokenvault"
)

func newKey(id string) string {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return id + ":" + base64.StdEncoding.EncodeToString(k)
}

func keyring(t *testing.T, lines ...string) *tokenvault.Keyring {
	t.Helper()
	k, err := tokenvault.ParseKeyring([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealedRoundTripAndNoPlaintextInNATS(t *testing.T) {
	ctx := context.Background()
	js := natstest.Start(t).JetStream(t)
	k1 := newKey("k1")
	v, err := tokenvault.Open(ctx, js, keyring(t, k1), tokenvault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok := &tokenvault.Token{AccessToken: "secret-access-AAA", RefreshToken: "secret-refresh-BBB", ClientSecret: "secret-client-CCC", Expiry: time.Now().Add(time.Hour)}
	if err := v.Put(ctx, "github", "fair:tenant-1", tok); err != nil {
		t.Fatal(err)
	}
	got, _, err := v.Get(ctx, "github", "fair:tenant-1")
	if err != nil || got.AccessToken != tok.AccessToken || got.RefreshToken != tok.RefreshToken {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, _, err := v.Get(ctx, "github", "fair:tenant-2"); !errors.Is(err, tokenvault.ErrNoToken) {
		t.Fatalf("another owner's Get = %v, want ErrNoToken", err)
	}
	// Nothing of the token is in the bucket in the clear.
	kv, _ := js.KeyValue(ctx, tokenvault.DefaultBucket)
	e, err := kv.Get(ctx, tokenvault.Key("github", "fair:tenant-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"secret-access", "secret-refresh", "secret-client", "tenant-1"} {
		if bytes.Contains(e.Value(), []byte(s)) || strings.Contains(e.Key(), s) {
			t.Fatalf("%q is in the KV entry %s = %s", s, e.Key(), e.Value())
		}
	}
	// A record copied under another owner's key does not open.
	if _, err := kv.Put(ctx, tokenvault.Key("github", "fair:tenant-2"), e.Value()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Get(ctx, "github", "fair:tenant-2"); err == nil || errors.Is(err, tokenvault.ErrNoToken) {
		t.Fatalf("a copied record opened for another owner: %v", err)
	}
	// Rotation: a new first key seals, the old one still opens.
	k2 := newKey("k2")
	v2, err := tokenvault.Open(ctx, js, keyring(t, k2, k1), tokenvault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := v2.Get(ctx, "github", "fair:tenant-1"); err != nil || got.AccessToken != tok.AccessToken {
		t.Fatalf("rotated keyring Get = %+v, %v", got, err)
	}
	if err := v2.Put(ctx, "github", "fair:tenant-3", tok); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Get(ctx, "github", "fair:tenant-3"); err == nil {
		t.Fatal("a keyring without k2 opened a record sealed with k2")
	}
	if err := v.Delete(ctx, "github", "fair:tenant-1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Get(ctx, "github", "fair:tenant-1"); !errors.Is(err, tokenvault.ErrNoToken) {
		t.Fatalf("Get after Delete = %v", err)
	}
}

// Ten workers find one expired token at once: exactly one refreshes it
// (a refresh token used twice would be revoked by a rotating server), and
// every one gets the new token.
func TestFreshRefreshesOnceAcrossWorkers(t *testing.T) {
	ctx := context.Background()
	js := natstest.Start(t).JetStream(t)
	ring := keyring(t, newKey("k1"))
	seed, err := tokenvault.Open(ctx, js, ring, tokenvault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := seed.Put(ctx, "linear", "agent:a1", &tokenvault.Token{AccessToken: "old", RefreshToken: "r1", Expiry: time.Now().Add(-time.Minute), Scopes: []string{"read"}}); err != nil {
		t.Fatal(err)
	}
	var refreshes atomic.Int32
	release := make(chan struct{})
	refresh := func(ctx context.Context, old *tokenvault.Token) (*tokenvault.Token, error) {
		if old.RefreshToken != "r1" {
			return nil, errors.New("refresh token reused")
		}
		refreshes.Add(1)
		<-release
		return &tokenvault.Token{AccessToken: "new", RefreshToken: "r2", Expiry: time.Now().Add(time.Hour)}, nil
	}
	var wg sync.WaitGroup
	got := make([]string, 10)
	errs := make([]error, 10)
	for i := range 10 {
		v, err := tokenvault.Open(ctx, js, ring, tokenvault.Options{WorkerID: "w" + string(rune('0'+i))})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			tok, err := v.Fresh(ctx, "linear", "agent:a1", refresh)
			errs[i] = err
			if tok != nil {
				got[i] = tok.AccessToken
			}
		})
	}
	for refreshes.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let the others reach the lease
	close(release)
	wg.Wait()
	if n := refreshes.Load(); n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}
	for i := range got {
		if errs[i] != nil || got[i] != "new" {
			t.Fatalf("worker %d: %q, %v", i, got[i], errs[i])
		}
	}
	tok, _, err := seed.Get(ctx, "linear", "agent:a1")
	if err != nil || tok.RefreshToken != "r2" || len(tok.Scopes) != 1 {
		t.Fatalf("stored after refresh: %+v, %v", tok, err)
	}
}

func TestExpiredWithoutRefreshIsNoToken(t *testing.T) {
	ctx := context.Background()
	js := natstest.Start(t).JetStream(t)
	v, err := tokenvault.Open(ctx, js, keyring(t, newKey("k1")), tokenvault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Put(ctx, "s", "o", &tokenvault.Token{AccessToken: "x", Expiry: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Fresh(ctx, "s", "o", nil); !errors.Is(err, tokenvault.ErrNoToken) {
		t.Fatalf("Fresh = %v, want ErrNoToken", err)
	}
}

func TestParseKeyringErrorsNeverQuoteKeys(t *testing.T) {
	for _, in := range []string{"", "# only a comment", "k1:c2VjcmV0LXNob3J0", "bad id!:" + strings.Repeat("A", 44), newKey("k1") + "\n" + newKey("k1")[:3] + strings.Repeat("B", 44)} {
		_, err := tokenvault.ParseKeyring([]byte(in))
		if err == nil {
			t.Fatalf("ParseKeyring(%q) accepted", in)
		}
		if strings.Contains(err.Error(), "c2VjcmV0") || strings.Contains(err.Error(), "AAAA") {
			t.Fatalf("error quotes the key: %v", err)
		}
	}
}
