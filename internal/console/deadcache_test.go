package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/protocol"
)

// The console keeps the dead letters' headers it read; a letter deleted
// from the stream afterwards is not listed again from what it kept.
func TestDeletedLetterNotListedFromTheCache(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r.publishMany(t, ctx, "turn.dead.a1.t1", 3, 1, "x", nats.Header{protocol.HeaderDeadReason: {"delivery limit reached"}},
		func(i int) []byte { return []byte(fmt.Sprintf("letter-%d", i)) })
	c, _ := r.login(t)
	if page := get(t, c, r.url+"/dead", http.StatusOK); !strings.Contains(page, "letter-1") {
		t.Fatal("the letter is not listed")
	}
	st, err := r.srv.JetStream(t).Stream(ctx, protocol.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, 2); err != nil {
		t.Fatal(err)
	}
	page := get(t, c, r.url+"/dead", http.StatusOK)
	if n := strings.Count(page, `<section class="dead"`); n != 2 || strings.Contains(page, `data-seq="2"`) {
		t.Errorf("after deleting letter 2 the page lists %d letters, letter 2: %v", n, strings.Contains(page, `data-seq="2"`))
	}
}
