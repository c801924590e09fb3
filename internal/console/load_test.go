package console_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/console"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// serveLimited serves the rig's console as cmd/console does (Listen,
// HTTPServer) with small bounds, and returns its URL.
func (r *rig) serveLimited(t *testing.T, l console.Limits) string {
	u, _ := r.serveLimitedLn(t, l)
	return u
}

// serveLimitedLn is serveLimited, with the listener that counts.
func (r *rig) serveLimitedLn(t *testing.T, l console.Limits) (string, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := console.HTTPServer(r.console, l, context.Background(), nil)
	cl := console.Listen(ln, l, nil)
	go func() { _ = hs.Serve(cl) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String(), cl
}

// A client that opens connections and keeps them idle (from 127.0.0.2,
// another address than the operator's 127.0.0.1) takes its own share of
// connections only: the operator is served while they are open, and
// the server closes every idle one, new or kept alive, by itself.
func TestIdleConnectionsTimeOut(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.url = r.serveLimited(t, console.Limits{ReadHeaderTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond, PerClient: 16, Total: 48})
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	var idle []net.Conn
	for range 200 {
		c, err := d.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	// A kept-alive connection that made one request, then idles.
	kept, err := d.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err == nil {
		fmt.Fprintf(kept, "GET /login HTTP/1.1\r\nHost: x\r\n\r\n")
		idle = append(idle, kept)
	}
	// The operator, meanwhile.
	c, _ := r.login(t)
	get(t, c, r.url+"/approvals", http.StatusOK)
	// Every idle connection is closed by the server.
	var wg sync.WaitGroup
	open := 0
	var mu sync.Mutex
	for _, c := range idle {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err := io.Copy(io.Discard, c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				mu.Lock()
				open++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if open > 0 {
		t.Errorf("%d of %d idle connections were still open after 20 s", open, len(idle))
	}
}

// Streams whose reader never reads, opened by one operator, take that
// operator's share of the live slots only: another operator's stream is
// served and carries events.
func TestStalledStreamsTakeOneShare(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	eve, _ := r.loginAs(t, "Eve")
	refused := 0
	for range 64 {
		req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/api/live", nil)
		resp, err := eve.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close() // never read
		if resp.StatusCode != http.StatusOK {
			refused++
		}
	}
	if refused != 64-8 {
		t.Errorf("one session opened %d of 64 streams, want 8", 64-refused)
	}
	ada, _ := r.loginAs(t, "Ada")
	req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/api/live?turn=t1", nil)
	resp, err := ada.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("another operator's stream: %s", resp.Status)
	}
	r.hold(t, "a1", "t1")
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "step.pending") {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("stream: %v after %q", err, got.String())
		}
		got.Write(buf[:n])
	}
}

// A flood of 100 malformed steps of 900 KB (the first five dead-lettered
// by the real worker, the others copies of its dead letter), beside a
// held step: /dead is one page of letters listed from
// their headers (its size does not grow with the payloads), each letter
// opens on its own page clipped with a count, and the pages read only
// what they show: ten loads of /approvals and /dead read less from NATS
// than two payloads of the flood.
func TestDeadLetterFlood(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.hold(t, "a1", "t1")
	js := r.srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	const n, size, real = 100, 900 << 10, 5
	big := []byte(strings.Repeat("x", size))
	st, err := js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	// The first few are dead-lettered by the worker; the rest are copies
	// of its dead letter (its headers, another payload), published
	// straight to TURN_DEAD so that the flood does not wait for the
	// worker to parse 900 KB a hundred times.
	for i := range real {
		if _, err := js.Publish(ctx, "turn.call.a1.t1", append([]byte(fmt.Sprintf("not a step %d ", i)), big...)); err != nil {
			t.Fatal(err)
		}
	}
	waitDead := func(want uint64) *jetstream.StreamInfo {
		for {
			info, err := st.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Msgs >= want {
				return info
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%d of %d dead-lettered", info.State.Msgs, want)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	info := waitDead(real)
	first, err := st.GetMsg(ctx, info.State.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	for i := real; i < n; i++ {
		m := nats.NewMsg(first.Subject)
		for k, v := range first.Header {
			if !strings.HasPrefix(k, "Nats-") { // its message id would make the copy a duplicate
				m.Header[k] = v
			}
		}
		m.Data = append([]byte(fmt.Sprintf("not a step %d ", i)), big...)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	waitDead(n)
	c, _ := r.login(t)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	in := r.consoleNC.Stats().InBytes
	var dead, approvals string
	var took []time.Duration
	for range 10 {
		t0 := time.Now()
		approvals = get(t, c, r.url+"/approvals", http.StatusOK)
		took = append(took, time.Since(t0))
		dead = get(t, c, r.url+"/dead", http.StatusOK)
	}
	slices.Sort(took)
	t.Logf("/approvals beside the flood: median %s, slowest %s (logged, not asserted)", took[len(took)/2], took[len(took)-1])
	runtime.ReadMemStats(&after)
	read := r.consoleNC.Stats().InBytes - in
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("/dead %d bytes, /approvals %d bytes; 10 loads of each: the console read %d KiB from NATS, the test process allocated %d MiB (worker included)", len(dead), len(approvals), read>>10, alloc>>20)
	if !strings.Contains(approvals, `data-agent="a1" data-turn="t1"`) {
		t.Error("the held step is not on /approvals")
	}
	if len(dead) > 512<<10 {
		t.Errorf("/dead is %d bytes for %d letters of %d bytes", len(dead), n, size)
	}
	if !strings.Contains(dead, fmt.Sprintf("%d in <code>TURN_DEAD</code>", n)) || !strings.Contains(dead, `id="older"`) {
		t.Errorf("/dead does not count the letters or page them")
	}
	if read > 2*size {
		t.Errorf("10 loads of /approvals and /dead read %d KiB from NATS: more than two payloads of the flood", read>>10)
	}
	// One letter, on its page: clipped, with what was left out.
	info, _ = st.Info(ctx)
	one := get(t, c, fmt.Sprintf("%s/dead/letter?seq=%d", r.url, info.State.LastSeq), http.StatusOK)
	if len(one) > 1<<20 || !strings.Contains(one, "bytes not shown here") {
		t.Errorf("a letter's page is %d bytes, clipped: %v", len(one), strings.Contains(one, "bytes not shown here"))
	}
	// The next page lists older letters.
	older := get(t, c, r.url+"/dead?before="+strings.Split(strings.SplitAfter(dead, `href="/dead?before=`)[1], `"`)[0], http.StatusOK)
	if !strings.Contains(older, "newer") || strings.Count(older, `<section class="dead"`) != 25 {
		t.Errorf("the older page has %d letters", strings.Count(older, `<section class="dead"`))
	}
}

// Nine operators' sessions open eight live streams each and never read
// them (72, past the console's 64): the oldest streams of the sessions
// holding the most are dropped, and another operator's stream is served
// and carries events.
func TestStalledStreamsOfManySessions(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stalled []*http.Response
	for i := range 9 {
		c, _ := r.loginAs(t, fmt.Sprintf("Eve%d", i))
		for range 8 {
			req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/api/live", nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close() // never read, until the end
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("stalled stream %d: %s", len(stalled), resp.Status)
			}
			stalled = append(stalled, resp)
		}
	}
	ada, _ := r.loginAs(t, "Ada")
	req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/api/live?turn=t1", nil)
	resp, err := ada.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("another operator's stream beside 72 stalled ones: %s", resp.Status)
	}
	r.hold(t, "a1", "t1")
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "step.pending") {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("stream: %v after %q", err, got.String())
		}
		got.Write(buf[:n])
	}
	// The dropped ones have ended: reading them now reaches their end.
	var ended atomic.Int64
	var wg sync.WaitGroup
	for _, s := range stalled {
		wg.Go(func() {
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(io.Discard, s.Body)
				close(done)
			}()
			select {
			case <-done:
				ended.Add(1)
			case <-time.After(3 * time.Second):
				s.Body.Close()
				<-done
			}
		})
	}
	wg.Wait()
	t.Logf("%d of %d stalled streams were dropped", ended.Load(), len(stalled))
	if ended.Load() < int64(len(stalled)-maxStreams+1) {
		t.Errorf("%d stalled streams dropped, want at least %d", ended.Load(), len(stalled)-maxStreams+1)
	}
}

// maxStreams is the console's bound on live streams (live.go).
const maxStreams = 64
