package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// One agent's malformed steps carry 1,500 headers each of zero-width
// characters (each a marker on the page, some forty times their bytes)
// and a payload of them; the worker dead-letters them with their
// headers. A page of /dead (25 letters) and a letter's own page stay
// bounded, count the headers they leave out, and another agent's held
// step is still on /approvals.
func TestDeadLetterHeadersBounded(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.hold(t, "quiet", "q1")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const n = 26
	r.publishMany(t, ctx, "turn.call.noisy.t1", n, 1500, strings.Repeat("\u200b\u200c", 4), nil, func(i int) []byte {
		return []byte(fmt.Sprintf("not a step %d %s", i, strings.Repeat("\u200b\u200c", 5000)))
	})
	info := r.waitDead(t, ctx, n)
	c, _ := r.login(t)
	dead := get(t, c, r.url+"/dead", http.StatusOK)
	one := get(t, c, fmt.Sprintf("%s/dead/letter?seq=%d", r.url, info.State.LastSeq), http.StatusOK)
	t.Logf("/dead: %d bytes, a letter's page: %d bytes", len(dead), len(one))
	if len(dead) > 1<<20 || !strings.Contains(dead, "more header value(s) not shown") {
		t.Errorf("/dead is %d bytes for %d letters, counts the headers left out: %v", len(dead), n, strings.Contains(dead, "more header value(s) not shown"))
	}
	if len(one) > 1<<20 || !strings.Contains(one, "more header value(s) not shown") {
		t.Errorf("a letter's page is %d bytes", len(one))
	}
	if !strings.Contains(get(t, c, r.url+"/approvals", http.StatusOK), `data-agent="quiet"`) {
		t.Error("the quiet agent's held step is not on /approvals")
	}
}
