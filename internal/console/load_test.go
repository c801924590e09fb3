package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/console"
	"github.com/agentbull/toolruntime/internal/turn"
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

// A flood of 200 malformed steps of 900 KB (the first two dead-lettered
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
	// The same console and held step without the flood: the baseline
	// its pages' times are measured against.
	quiet := newRig(t)
	quiet.hold(t, "a1", "t1")
	js := r.srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	const n, size, real = 200, 900 << 10, 2
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
	info := r.waitDead(t, ctx, real)
	first, err := st.GetMsg(ctx, info.State.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	// One payload for every copy, numbered in place for each: a publish
	// copies what it sends before it returns, so the flood costs the
	// process (the race detector checks every copy of its bytes) the
	// copies NATS makes, not one more of the test's own a letter.
	payload := append([]byte(fmt.Sprintf("not a step %06d ", 0)), big...)
	letter := func(i int) *nats.Msg {
		m := nats.NewMsg(first.Subject)
		for k, v := range first.Header {
			if !strings.HasPrefix(k, "Nats-") { // its message id would make the copy a duplicate
				m.Header[k] = v
			}
		}
		copy(payload, fmt.Sprintf("not a step %06d ", i))
		m.Data = payload
		m.Header.Set("Nats-Msg-Id", fmt.Sprintf("flood-%d", i))
		return m
	}
	copyLetter := func(i int) {
		// A publish whose acknowledgement was lost (the test's own
		// connection is flooded too) is sent again under its message id.
		for try := 0; ; try++ {
			pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
			_, err := js.PublishMsg(pctx, letter(i))
			pcancel()
			if err == nil {
				break
			}
			if try == 5 {
				t.Fatal(err)
			}
		}
	}
	// The flood, eight publishes in flight: the server stores one while
	// the next is sent. A letter whose acknowledgement did not come is
	// sent again, alone.
	type sent struct {
		i int
		f jetstream.PubAckFuture
	}
	var inflight []sent
	settle := func(s sent) {
		select {
		case <-s.f.Ok():
		case <-s.f.Err():
			copyLetter(s.i)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	ajs, err := jetstream.New(r.srv.Connect(t), jetstream.WithPublishAsyncTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i := real; i < n; i++ {
		if len(inflight) == 8 {
			settle(inflight[0])
			inflight = inflight[1:]
		}
		f, err := ajs.PublishMsgAsync(letter(i))
		if err != nil {
			t.Fatal(err)
		}
		inflight = append(inflight, sent{i, f})
	}
	for _, s := range inflight {
		settle(s)
	}
	r.waitDead(t, ctx, n)
	// The quiet console lists as many letters, with the same headers and
	// small payloads: the page's own work, without the flood's bytes.
	qjs := quiet.srv.JetStream(t)
	for i := range 30 {
		m := nats.NewMsg(first.Subject)
		for k, v := range first.Header {
			if !strings.HasPrefix(k, "Nats-") {
				m.Header[k] = v
			}
		}
		m.Data = []byte(fmt.Sprintf("not a step %d %s", i, big[:64<<10]))
		if _, err := qjs.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := r.login(t)
	qc, _ := quiet.login(t)
	// One operator at a time, the flooded console's pages interleaved
	// with the quiet one's. The flood goes on before each /approvals: a
	// letter more on the held step's turn, which no load has read yet
	// (/dead must read a new 900 KB letter, which costs the server its
	// payload, so /dead is timed on the letters it listed before).
	next := n
	more := func() { copyLetter(next); next++ }
	m := medianTimes(t, 7, pageLoad{c, r.url + "/approvals", more}, pageLoad{qc, quiet.url + "/approvals", nil},
		pageLoad{c, r.url + "/dead", nil}, pageLoad{qc, quiet.url + "/dead", nil})
	t.Logf("medians beside the flood against without it: /approvals %s against %s, /dead %s against %s", m[0], m[1], m[2], m[3])
	if m[0] > slowdownBound*m[1] || m[2] > slowdownBound*m[3] {
		t.Errorf("beside the flood /approvals takes %.1f times as long as without it, /dead %.1f times (bound %d)",
			float64(m[0])/float64(m[1]), float64(m[2])/float64(m[3]), slowdownBound)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	// The heap in use, sampled while ten operators load /approvals and
	// /dead at once: its growth over the idle heap
	// (worker and NATS server included, all in this process).
	var peak uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stopSampling:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	in := r.consoleNC.Stats().InBytes
	var dead, approvals string
	var took []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for range 1 {
				t0 := time.Now()
				a := get(t, c, r.url+"/approvals", http.StatusOK)
				d := time.Since(t0)
				dd := get(t, c, r.url+"/dead", http.StatusOK)
				mu.Lock()
				approvals, dead = a, dd
				took = append(took, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stopSampling)
	<-sampled
	slices.Sort(took)
	t.Logf("/approvals beside the flood, ten loads at once: median %s, slowest %s (logged, not asserted)", took[len(took)/2], took[len(took)-1])
	runtime.ReadMemStats(&after)
	read := r.consoleNC.Stats().InBytes - in
	alloc := after.TotalAlloc - before.TotalAlloc
	growth := int64(peak) - int64(before.HeapInuse)
	// What the console holds is bounded by what it reads from NATS
	// (asserted below); the process's heap also holds the NATS server's
	// caches of the flood's blocks, so it is logged, not asserted.
	t.Logf("/dead %d bytes, /approvals %d bytes; 10 loads of each at once: the console read %d KiB from NATS (%d KiB a load of both); the process (NATS server and worker included) allocated %d MiB, its heap in use grew by at most %d MiB from %d MiB; the flood is %d MiB",
		len(dead), len(approvals), read>>10, read/10>>10, alloc>>20, growth>>20, before.HeapInuse>>20, n*size>>20)
	if !strings.Contains(approvals, `data-agent="a1" data-turn="t1"`) {
		t.Error("the held step is not on /approvals")
	}
	if len(dead) > 512<<10 {
		t.Errorf("/dead is %d bytes for %d letters of %d bytes", len(dead), n, size)
	}
	if !strings.Contains(dead, fmt.Sprintf("%d in <code>TURN_DEAD</code>", next)) || !strings.Contains(dead, `id="older"`) {
		t.Errorf("/dead does not count the letters or page them")
	}
	if read > 10*size/4 {
		t.Errorf("10 loads of /approvals and /dead read %d KiB from NATS: more than a quarter of a payload of the flood a load", read>>10)
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

// 10,000 held steps: /approvals is one page of 20 (soonest to expire
// first) with the count and the way to the others, its size does not
// grow with the steps held, the last page shows the last ones, and a
// load after the first reads from NATS what the page shows: as much as
// the same page beside its own 20 steps alone (a listing of every held
// key at each load read five times as much, and took 1.1 s beside
// 40,000).
func TestTenThousandHeldSteps(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	kv, err := r.srv.JetStream(t).KeyValue(ctx, protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	const n, stepsPerPage = 10000, 20
	var recordSize int
	revs := make([]uint64, n)
	base := time.Now().Add(time.Hour).UTC()
	args := json.RawMessage(`{"command":"rm -rf /tmp/` + "\u0430" + `"}`)
	// The records are written as the workers write them (a put on the
	// bucket's subject), many in flight at once.
	ajs, err := jetstream.New(r.srv.Connect(t), jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		t.Fatal(err)
	}
	put := func(from int) {
		futures := map[int]jetstream.PubAckFuture{}
		for i := from; i < n && (from > 0 || i < stepsPerPage); i++ {
			p := turn.PendingStep{AgentID: "a1", TurnID: fmt.Sprintf("h%05d", i), Step: 0, State: turn.StatePending,
				ExpiresAt: base.Add(time.Duration(i) * time.Second),
				Calls:     []turn.HeldCall{{Type: protocol.ItemFunctionCall, CallID: "c1", Name: "run_command", Valid: args, Approval: "destructive"}}}
			b, _ := json.Marshal(p)
			if i == 0 {
				recordSize = len(b)
			}
			f, err := ajs.PublishAsync(fmt.Sprintf("$KV.%s.approval.a1.h%05d.0", protocol.BucketState, i), b, jetstream.WithStallWait(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			futures[i] = f
		}
		for i, f := range futures {
			select {
			case ack := <-f.Ok():
				revs[i] = ack.Sequence
			case err := <-f.Err():
				t.Fatal(err)
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}
	c, _ := r.login(t)
	// The first page's 20 steps alone: what a load of that page reads.
	put(0)
	_ = get(t, c, r.url+"/approvals", http.StatusOK)
	in := r.consoleNC.Stats().InBytes
	_ = get(t, c, r.url+"/approvals", http.StatusOK)
	alone := r.consoleNC.Stats().InBytes - in
	t0 := time.Now()
	put(stepsPerPage)
	t.Logf("%d held steps written in %s", n-stepsPerPage, time.Since(t0).Round(time.Millisecond))
	in = r.consoleNC.Stats().InBytes
	first := get(t, c, r.url+"/approvals", http.StatusOK)
	firstRead := r.consoleNC.Stats().InBytes - in
	in = r.consoleNC.Stats().InBytes
	_ = get(t, c, r.url+"/approvals", http.StatusOK)
	againRead := r.consoleNC.Stats().InBytes - in
	last := get(t, c, r.url+"/approvals?page=500", http.StatusOK)
	t.Logf("/approvals with %d held steps (records of %d bytes): %d bytes; the first load read %d KiB from NATS, the next %d KiB (%d KiB beside the first page's steps alone); the last page %d bytes",
		n, recordSize, len(first), firstRead>>10, againRead>>10, alone>>10, len(last))
	if !strings.Contains(first, fmt.Sprintf("%d held step(s)", n)) || !strings.Contains(first, "page 1 of 500") || !strings.Contains(first, `id="next-page"`) {
		t.Errorf("the first page does not count and page the held steps")
	}
	if got := strings.Count(first, `<section class="step"`); got != 20 {
		t.Errorf("the first page shows %d steps, want 20", got)
	}
	if !strings.Contains(first, `data-turn="h00000"`) || !strings.Contains(first, `data-turn="h00019"`) || strings.Contains(first, `data-turn="h00020"`) {
		t.Error("the first page is not the 20 soonest to expire")
	}
	if !strings.Contains(first, "0430 CYRILLIC SMALL LETTER A а⟧") {
		t.Error("the held arguments' look-alike is not named")
	}
	if len(first) > 256<<10 {
		t.Errorf("the first page is %d bytes", len(first))
	}
	if !strings.Contains(last, `data-turn="h09999"`) || strings.Count(last, `<section class="step"`) != 20 {
		t.Error("the last page does not show the last 20")
	}
	// A load reads the keys' metadata and the records it shows, not every
	// record: less than half of what the records weigh.
	if againRead > uint64(n*recordSize/2) {
		t.Errorf("a second load read %d KiB from NATS; the records weigh %d KiB: they are read whole", againRead>>10, n*recordSize>>10)
	}
	if againRead > 2*alone {
		t.Errorf("a second load of the same page read %d KiB from NATS beside %d held steps, %d KiB beside its %d steps alone: a load reads what is held, not what it shows", againRead>>10, n, alone>>10, stepsPerPage)
	}
	// Records the bucket's age bound removes (no watch sees it: the
	// stream's oldest messages go, in sequence order), and one deleted,
	// are not counted.
	cut := revs[n/2]
	st, err := r.srv.JetStream(t).Stream(ctx, "KV_"+protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(cut)); err != nil {
		t.Fatal(err)
	}
	left := 0
	for i, rev := range revs {
		if rev >= cut && i != n-1 {
			left++
		}
	}
	if err := kv.Delete(ctx, fmt.Sprintf("approval.a1.h%05d.0", n-1)); err != nil {
		t.Fatal(err)
	}
	if page := get(t, c, r.url+"/approvals", http.StatusOK); !strings.Contains(page, fmt.Sprintf("%d held step(s)", left)) {
		m := regexp.MustCompile(`\d+ held step\(s\)`).FindString(page)
		t.Errorf("after %d records aged out and one deleted, the page counts %q, want %d", n-left-1, m, left)
	}
}
