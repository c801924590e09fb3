package console_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/console"
)

// Connections from the operator's own address, twice as many as one
// address may hold, each of which asks, without logging in, for the
// console's script a thousand times in one write (pipelined keep-alive
// requests) and never reads an answer, with a receive buffer of a few
// KiB: the server's writes block, in a handler, until the page write
// timeout. A connection whose answer waits for its client to read it
// waits on its client, as one waiting for its headers or its body does:
// the operator's new requests are served, and the unread connections
// are the ones closed to make room.
func TestUnreadAnswersFromTheOperatorsAddress(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const per = 16
	var ln net.Listener
	r.url, ln = r.serveLimitedLn(t, console.Limits{PerClient: per, Total: 256})
	addr := strings.TrimPrefix(r.url, "http://")
	c, _ := r.login(t)
	c.Transport = &http.Transport{DisableKeepAlives: true}
	c.Timeout = 20 * time.Second

	pipelined := strings.Repeat("GET /static/console.js HTTP/1.1\r\nHost: x\r\n\r\n", 1000)
	small := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		_ = rc.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		return err
	}}
	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	var wg sync.WaitGroup
	for range 2 * per {
		wg.Go(func() {
			conn, err := small.Dial("tcp", addr)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			// The write may block too, once the server stops reading.
			_ = conn.SetWriteDeadline(time.Now().Add(3 * time.Second))
			_, _ = io.WriteString(conn, pipelined)
		})
	}
	wg.Wait()
	// Every connection the attack kept holds a handler blocked writing.
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, perHost := console.ListenerCounts(ln)
		if perHost["127.0.0.1"] >= per || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// and every one of them is blocked writing: none goes in and out of
	// the idle list between its requests any more. Until the socket
	// buffers fill, a handler's writes return at once and its
	// connection is in a handler, not waiting: the attack holds only
	// once all of them wait. Without the fix none is ever counted as
	// waiting, and the operator's requests follow the deadline.
	for deadline, steady := time.Now().Add(10*time.Second), 0; steady < 10 && time.Now().Before(deadline); {
		if w := console.ListenerWaiting(ln); w == per {
			steady++
		} else {
			steady = 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	total, perHost := console.ListenerCounts(ln)
	t.Logf("open: %d (%d from 127.0.0.1), waiting on their clients: %d", total, perHost["127.0.0.1"], console.ListenerWaiting(ln))
	failed := 0
	for i := range 5 {
		resp, err := c.Get(r.url + "/approvals")
		if err != nil {
			failed++
			t.Logf("the operator's request %d: %v", i, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Approvals") {
			failed++
			t.Logf("the operator's request %d: %s", i, resp.Status)
		}
	}
	t.Logf("%d of the operator's 5 requests failed beside %d connections that never read their answers", failed, 2*per)
	if failed > 0 {
		t.Errorf("%d of the operator's 5 requests failed beside %d pipelined connections from its address that never read", failed, 2*per)
	}
}
