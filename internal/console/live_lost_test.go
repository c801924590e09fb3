package console_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A page that reads slower than events come is told how many it lost:
// a stream holds a bounded number of rendered events (512, 4 MiB), and
// every event published is either sent or counted in a "lost" event.
func TestLiveLostCounted(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	c, _ := r.login(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/api/live?agent=lost", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	if l, _ := br.ReadString('\n'); !strings.HasPrefix(l, ": live") {
		t.Fatalf("first line %q", l)
	}
	// 4,000 events of some 8 KiB rendered: more than the stream holds
	// and the sockets' buffers together, published while the page does
	// not read (for less than the write timeout, which would drop it).
	const n = 4000
	nc := r.srv.Connect(t)
	ev := []byte(`{"state":"running","label":"` + strings.Repeat("x", 4000) + `"}`)
	for range n {
		if err := nc.Publish("turn.activity.lost.t1", ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	sent, lost, lostEvent := 0, 0, false
	for sent+lost < n {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d sent and %d lost: %v", sent, lost, err)
		}
		switch {
		case strings.HasPrefix(l, "data: {"):
			sent++
		case l == "event: lost\n":
			lostEvent = true
		case lostEvent && strings.HasPrefix(l, "data: "):
			k, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(l, "data: ")))
			if err != nil || k <= 0 {
				t.Fatalf("lost event %q", l)
			}
			lost += k
			lostEvent = false
		}
	}
	t.Logf("%d events: %d sent, %d counted lost", n, sent, lost)
	if sent+lost != n || lost == 0 || sent < 512 {
		t.Errorf("%d events: %d sent, %d counted lost", n, sent, lost)
	}
}
