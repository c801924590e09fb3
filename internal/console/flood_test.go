package console_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/console"
)

// floodSize is how many connections an attack opens: with
// CONSOLE_FLOOD=full, 20,000 or as many as this process's descriptors
// allow beside the console's own bound (both ends of every connection
// are in this process); otherwise 4,000, past both bounds, so that the
// suite's run stays short.
func floodSize(t *testing.T) int {
	if os.Getenv("CONSOLE_FLOOD") != "full" {
		return 4000
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	return max(1000, min(20000, int(rl.Cur)-console.DefaultLimits.Total-1500))
}

// flood holds n connections to addr from the given local addresses and
// opens each again as soon as the server closes it, until stop: a
// quarter never send a byte, a quarter send half a request's headers, a
// quarter make one request and stay kept alive, a quarter trickle a
// header byte at a time. It returns how many it opened in all and a
// function that stops it and counts the connections still open.
func flood(t *testing.T, addr string, from []net.IP, n int) (opened *atomic.Int64, stop func() (open int)) {
	t.Helper()
	opened = new(atomic.Int64)
	conns := make([]net.Conn, n)
	dial := func(i int) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from[i%len(from)]}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return nil
		}
		opened.Add(1)
		switch i % 4 {
		case 1:
			_, _ = io.WriteString(c, "GET /approvals HTTP/1.1\r\nHost: x\r\n")
		case 2:
			_, _ = io.WriteString(c, "GET /login HTTP/1.1\r\nHost: x\r\n\r\n")
		case 3:
			_, _ = io.WriteString(c, "GET /approvals HTTP/1.1\r\nX-Slow: ")
		}
		return c
	}
	const keepers = 8
	var dw sync.WaitGroup
	for k := range 2 * keepers {
		dw.Go(func() {
			for i := k; i < n; i += 2 * keepers {
				conns[i] = dial(i)
			}
		})
	}
	dw.Wait()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for k := range keepers {
		wg.Go(func() {
			buf := make([]byte, 4096)
			for {
				for i := k; i < n; i += keepers {
					select {
					case <-done:
						return
					default:
					}
					c := conns[i]
					if c == nil {
						conns[i] = dial(i)
						time.Sleep(2 * time.Millisecond) // paced: at most 4,000 a second, for the suite's machine
						continue
					}
					if i%4 == 3 {
						_, _ = io.WriteString(c, "a")
					}
					_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
					for {
						_, err := c.Read(buf)
						if err == nil {
							continue // a kept-alive connection's answer
						}
						if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
							c.Close()
							conns[i] = dial(i)
							time.Sleep(2 * time.Millisecond)
						}
						break
					}
				}
			}
		})
	}
	return opened, func() int {
		close(done)
		wg.Wait()
		// Connections the kernel accepted but the server has not yet
		// taken (each makes room as it is taken) settle first.
		time.Sleep(time.Second)
		// Count those still open: a read that times out (rather than
		// ending) is an open connection.
		open := 0
		var mu sync.Mutex
		var cw sync.WaitGroup
		for k := range keepers {
			cw.Go(func() {
				buf := make([]byte, 4096)
				for i := k; i < n; i += keepers {
					c := conns[i]
					if c == nil {
						continue
					}
					_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
					for {
						_, err := c.Read(buf)
						if err == nil {
							continue
						}
						if ne, ok := err.(net.Error); ok && ne.Timeout() {
							mu.Lock()
							open++
							mu.Unlock()
						}
						break
					}
					c.Close()
				}
			})
		}
		cw.Wait()
		return open
	}
}

// An attack of 20,000 connections (or as many as the descriptors allow)
// held idle, half-sent, kept alive or trickled, opened again as soon as
// they are closed, from the operator's own address and from a hundred
// others: with the console's default bounds the operator's requests
// are all answered meanwhile (each on a new connection), the attack
// keeps no more than the bounds open, and what it holds is its own.
func TestConnectionFlood(t *testing.T) {
	r := newRig(t)
	var ln net.Listener
	r.url, ln = r.serveLimitedLn(t, console.Limits{})
	addr := strings.TrimPrefix(r.url, "http://")
	c, _ := r.login(t)
	c.Transport = &http.Transport{DisableKeepAlives: true}
	c.Timeout = 60 * time.Second
	n := floodSize(t)
	var many []net.IP
	for i := range 100 {
		many = append(many, net.IPv4(127, 0, 1, byte(i+1)))
	}
	for _, tc := range []struct {
		name string
		from []net.IP
	}{
		{"from the operator's address", []net.IP{net.IPv4(127, 0, 0, 1)}},
		{"from a hundred addresses", many},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			opened, stop := flood(t, addr, tc.from, n)
			t.Logf("%d connections opened in %s", n, time.Since(t0).Round(time.Millisecond))
			// The console's own counts, sampled while the attack lasts.
			most, mostPer := 0, 0
			sampled := make(chan struct{})
			sampling := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					total, per := console.ListenerCounts(ln)
					most = max(most, total)
					for _, v := range per {
						mostPer = max(mostPer, v)
					}
					select {
					case <-sampling:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
			failed := 0
			t1 := time.Now()
			for range 10 {
				resp, err := c.Get(r.url + "/approvals")
				if err != nil {
					failed++
					t.Logf("the operator's request: %v", err)
					continue
				}
				b, _ := io.ReadAll(bufio.NewReader(resp.Body))
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Approvals") {
					failed++
					t.Logf("the operator's request: %s", resp.Status)
				}
			}
			took := time.Since(t1)
			close(sampling)
			<-sampled
			total := opened.Load()
			open := stop()
			t.Logf("%d connections held, %d opened in all; the operator's 10 requests took %s, %d failed; the console counted at most %d open, %d from one address (bounds %d, %d); the attack saw %d still open at its end",
				n, total, took.Round(time.Millisecond), failed, most, mostPer, console.DefaultLimits.Total, console.DefaultLimits.PerClient, open)
			if failed > 0 {
				t.Errorf("%d of the operator's 10 requests failed beside %d attacking connections", failed, n)
			}
			if most > console.DefaultLimits.Total || mostPer > console.DefaultLimits.PerClient {
				t.Errorf("the console held %d connections, %d from one address: past its bounds", most, mostPer)
			}
		})
	}
}

// Headers sent a byte at a time and bodies trickled the same way are
// closed by the server when the header and request timeouts pass,
// however long the client goes on trickling; the operator is served
// meanwhile.
func TestSlowHeadersAndBodiesTimeOut(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.url = r.serveLimited(t, console.Limits{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second})
	addr := strings.TrimPrefix(r.url, "http://")
	var wg sync.WaitGroup
	var closedByServer, stillOpen atomic.Int64
	for i := range 120 {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			start := "GET /approvals HTTP/1.1\r\nHost: x\r\nX-Slow: "
			if i%3 == 0 {
				start = "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\ntoken="
			}
			if _, err := io.WriteString(c, start); err != nil {
				t.Error(err)
				return
			}
			// Trickle for up to 30 s (15 times the timeouts), reading
			// for the server's end between bytes.
			buf := make([]byte, 4096)
			for range 300 {
				if _, err := io.WriteString(c, "a"); err != nil {
					closedByServer.Add(1)
					return
				}
				_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				if _, err := c.Read(buf); err != nil {
					if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
						closedByServer.Add(1)
						return
					}
				} else {
					// An answer (a 408 or 400): then the end.
					_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
					if _, err := io.Copy(io.Discard, c); err == nil {
						closedByServer.Add(1)
						return
					}
				}
			}
			stillOpen.Add(1)
		})
	}
	c, _ := r.login(t)
	for range 5 {
		get(t, c, r.url+"/approvals", http.StatusOK)
		time.Sleep(300 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("%d slow connections closed by the server, %d still open after 30 s of trickling", closedByServer.Load(), stillOpen.Load())
	if stillOpen.Load() > 0 {
		t.Errorf("%d of 120 trickling connections were never closed", stillOpen.Load())
	}
}
