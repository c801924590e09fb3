package mcpdoor_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/mcpdoor"
)

// paceTest sends n requests (token, body) from conns connections, each
// sending its next request when the last is answered, to a door paced at
// rate a second, and reports the answers by status and how long they
// took.
func paceTest(t *testing.T, rate float64, n, conns int, token, body string) (map[int]int, time.Duration) {
	t.Helper()
	s, _ := fleet(t)
	ps := principals(t, fmt.Sprintf(`{"principals":[{"name":"noisy","token_sha256":[%q],"agent_id":"agent-noisy"}]}`, hash("noisy-secret-token")))
	door := serveDoor(t, s, mcpdoor.Config{Principals: ps, Rate: rate})
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}, Timeout: 30 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	var (
		mu     sync.Mutex
		status = map[int]int{}
		next   atomic.Int64
		wg     sync.WaitGroup
	)
	t0 := time.Now()
	for range conns {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				resp, err := c.Do(mcpPost(door.URL+mcpdoor.Path, token, "2025-11-25", body))
				if err != nil {
					t.Errorf("no answer: %v", err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				status[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return status, time.Since(t0)
}

// TestFloodIsPacedToItsRate: a closed-loop client of one principal
// sending 60 requests from 8 connections to a door paced at 20 a second
// (burst 20) gets every answer, but no faster than the rate: the 40
// requests past the burst take at least 2 s. The bound is a floor, which
// a slow machine only makes easier to meet; without the pacing the 60
// cheap answers take milliseconds.
func TestFloodIsPacedToItsRate(t *testing.T) {
	status, took := paceTest(t, 20, 60, 8, "noisy-secret-token", listBody)
	if status[http.StatusOK] != 60 {
		t.Fatalf("answers by status %v, want 60 of 200", status)
	}
	if took < 1500*time.Millisecond {
		t.Fatalf("60 requests at 20 a second (burst 20) took %s: not paced", took)
	}
}

// TestBadTokenFloodIsPaced: the same flood with a token the door does
// not know is refused (401), paced by remote address like a principal's.
func TestBadTokenFloodIsPaced(t *testing.T) {
	status, took := paceTest(t, 20, 60, 8, "not-a-token", listBody)
	if status[http.StatusUnauthorized] != 60 {
		t.Fatalf("answers by status %v, want 60 of 401", status)
	}
	if took < 1500*time.Millisecond {
		t.Fatalf("60 refusals at 20 a second (burst 20) took %s: not paced", took)
	}
}

// TestFloodPastHeldIsRefused: with more connections than the door holds
// requests of one principal, the excess is refused at once with 429,
// Retry-After, a JSON-RPC error, and the connection closed.
func TestFloodPastHeldIsRefused(t *testing.T) {
	s, _ := fleet(t)
	ps := principals(t, fmt.Sprintf(`{"principals":[{"name":"noisy","token_sha256":[%q],"agent_id":"agent-noisy"}]}`, hash("noisy-secret-token")))
	door := serveDoor(t, s, mcpdoor.Config{Principals: ps, Rate: 10})
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}, Timeout: 30 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	const n = 200 // > burst 10 + 64 held, with room for tokens that come back
	var refused, ok atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := c.Do(mcpPost(door.URL+mcpdoor.Path, "noisy-secret-token", "2025-11-25", listBody))
			if err != nil {
				t.Errorf("no answer: %v", err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusTooManyRequests:
				refused.Add(1)
				if resp.Header.Get("Retry-After") == "" || !resp.Close || !strings.Contains(string(b), `"jsonrpc"`) {
					t.Errorf("a 429 without Retry-After, Connection: close or a JSON-RPC body: %v %s", resp.Header, b)
				}
			default:
				t.Errorf("answer %d %s", resp.StatusCode, b)
			}
		})
	}
	wg.Wait()
	// Tokens come back while the requests arrive, so a few more than
	// burst + held may be served.
	if refused.Load() < 10 || ok.Load()+refused.Load() != n {
		t.Fatalf("served %d, refused %d of %d", ok.Load(), refused.Load(), n)
	}
}
