package console_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/console"
)

// Requests whose headers came whole and whose bodies trickle a byte at
// a time, from the operator's own address (a judge on loopback, a shared
// proxy), twice as many as one address may hold: a login form, an
// action refused before its body is read (the server reads what the
// handler left of it before answering), and a page asked with a body.
// A connection waiting for its body waits on its client, as one waiting
// for its headers does: the operator's new requests are served, and the
// trickling connections are the ones closed to make room.
func TestSlowBodiesFromTheOperatorsAddress(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const per = 16
	var ln net.Listener
	r.url, ln = r.serveLimitedLn(t, console.Limits{PerClient: per, Total: 256})
	addr := strings.TrimPrefix(r.url, "http://")
	c, _ := r.login(t)
	c.Transport = &http.Transport{DisableKeepAlives: true}
	c.Timeout = 20 * time.Second

	starts := []string{
		"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 60000\r\n\r\ntoken=",
		"POST /approvals/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 60000\r\n\r\ncsrf=",
		"GET /login HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\nx",
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var opened atomic.Int64
	for i := range 2 * per {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				opened.Add(1)
				_, err = io.WriteString(conn, starts[i%len(starts)])
				for err == nil {
					select {
					case <-done:
						conn.Close()
						return
					case <-time.After(50 * time.Millisecond):
					}
					_, err = io.WriteString(conn, "a")
				}
				conn.Close()
			}
		})
	}
	defer func() { close(done); wg.Wait() }()
	// The attack holds every connection one address may keep before the
	// operator asks.
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, perHost := console.ListenerCounts(ln)
		if perHost["127.0.0.1"] >= per || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // every held connection is in its handler, reading
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
	t.Logf("%d trickling connections opened from the operator's address; %d of the operator's 5 requests failed", opened.Load(), failed)
	if failed > 0 {
		t.Error(fmt.Sprintf("%d of the operator's 5 requests failed beside %d bodies trickled from its address", failed, 2*per))
	}
}
