package mcpdoor_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/mcpdoor"
)

// noisyBound is the noisy principal's max_in_flight in
// TestOnePrincipalsFloodLeavesAnotherAlone.
const noisyBound = 4

// TestOnePrincipalsFloodLeavesAnotherAlone sends a flood of one
// principal's requests (tools/call, tools/list, malformed JSON, JSON-RPC
// without a method, bodies over the bound; 1,000 by default, the count in
// $MCPDOOR_FLOOD otherwise, 10,000 for issue 36's figure) while another
// principal's calls are timed. Every flood request must get an HTTP
// answer with a JSON-RPC body (or 202 for what is no call), and every
// call of the other principal must succeed. It logs that principal's p99
// under the flood over its p99 idle, measured in rounds interleaved with
// the flood's so that both see the same machine; the ratio is logged,
// not asserted: on two shared cores it is machine time, and the goal
// (2 x) is not reached (docs in the report).
func TestOnePrincipalsFloodLeavesAnotherAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood of requests: not under -short")
	}
	s, _ := fleet(t)
	ps := principals(t, fmt.Sprintf(`{"principals":[
		{"name":"noisy","token_sha256":[%q],"agent_id":"agent-noisy","fairness":{"key":"tenant-noisy"},"max_in_flight":%d},
		{"name":"quiet","token_sha256":[%q],"agent_id":"agent-quiet","fairness":{"key":"tenant-quiet"}}]}`,
		hash("noisy-secret-token"), noisyBound, hash("quiet-secret-token")))
	const maxBody = 16 << 10
	door := serveDoor(t, s, mcpdoor.Config{Principals: ps, MaxBodyBytes: maxBody})
	url := door.URL + mcpdoor.Path
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}

	send := func(token, body string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	quietCall := func() time.Duration {
		t0 := time.Now()
		code, body, err := send("quiet-secret-token", echoBody)
		d := time.Since(t0)
		if err != nil || code != http.StatusOK || !strings.Contains(body, `"text":"x"`) {
			t.Fatalf("the quiet principal's call: %d %s %v", code, body, err)
		}
		return d
	}

	bodies := []string{
		echoBody, echoBody, echoBody, echoBody, echoBody, echoBody,
		listBody,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":`, // cut short
		`{"jsonrpc":"2.0","id":4,"params":{}}`,                    // no method
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", maxBody) + `"}}}`,
	}
	var (
		total    = 1000
		rounds   = 5
		workers  = 16
		statuses sync.Map // status -> *atomic.Int64
	)
	// flood sends n requests of the noisy principal from workers
	// goroutines, and fails the test on a request that got no answer or
	// one without a JSON-RPC body.
	flood := func(n int, done chan<- struct{}) {
		defer close(done)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					code, body, err := send("noisy-secret-token", bodies[i%len(bodies)])
					if err != nil {
						t.Errorf("a noisy request got no answer: %v", err)
						return
					}
					if code != http.StatusAccepted && !strings.Contains(body, `"jsonrpc"`) && !strings.Contains(body, "exceeds") &&
						!strings.Contains(body, "malformed") {
						t.Errorf("a noisy request's answer %d %.200s", code, body)
					}
					v, _ := statuses.LoadOrStore(code, new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
				}
			})
		}
		wg.Wait()
	}

	if v := os.Getenv("MCPDOOR_FLOOD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < rounds {
			t.Fatalf("MCPDOOR_FLOOD=%q: want a count of requests", v)
		}
		total = n
	}
	for range 10 { // warm up: connections, catalogs, streams
		quietCall()
	}
	var idle, loaded []time.Duration
	for r := range rounds {
		for range 20 {
			idle = append(idle, quietCall())
		}
		done := make(chan struct{})
		go flood(total/rounds, done)
		for n := 0; ; n++ {
			select {
			case <-done:
			default:
				loaded = append(loaded, quietCall())
				continue
			}
			if n == 0 {
				t.Logf("round %d: the flood ended before a quiet call", r)
			}
			break
		}
	}
	if t.Failed() {
		return
	}
	p99 := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[max(0, min(len(s)-1, int(0.99*float64(len(s))+0.5)-1))]
	}
	pi, pl := p99(idle), p99(loaded)
	var counts []string
	statuses.Range(func(k, v any) bool {
		counts = append(counts, fmt.Sprintf("%v: %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	slices.Sort(counts)
	ratio := float64(pl) / float64(pi)
	t.Logf("quiet principal: idle p99 %s (%d calls), under the flood p99 %s (%d calls): %.2f x; flood answers by status %v",
		pi, len(idle), pl, len(loaded), ratio, counts)
}
