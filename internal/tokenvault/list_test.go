package tokenvault_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/tokenvault"
)

// A server's shareable tool list round-trips; none is nil; one over
// MaxRecord, or for a server name that is no KV token, is refused.
func TestToolListKept(t *testing.T) {
	ctx := context.Background()
	v, err := tokenvault.Open(ctx, natstest.Start(t).JetStream(t), keyring(t, newKey("k1")), tokenvault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := v.GetList(ctx, "github"); b != nil || err != nil {
		t.Fatalf("no list: %q, %v", b, err)
	}
	list := []byte(`{"tools":[{"name":"search"}]}`)
	if err := v.PutList(ctx, "github", list); err != nil {
		t.Fatal(err)
	}
	if b, err := v.GetList(ctx, "github"); err != nil || !bytes.Equal(b, list) {
		t.Fatalf("GetList = %q, %v", b, err)
	}
	if err := v.PutList(ctx, "github", make([]byte, tokenvault.MaxRecord+1)); err == nil {
		t.Fatal("a list over MaxRecord was kept")
	}
	if err := v.PutList(ctx, "a.b", list); err == nil {
		t.Fatal("a server name with a dot was taken")
	}
}
