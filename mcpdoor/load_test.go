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

// floodBound is the most the quiet principal's p99 under the flood may be
// over its p99 idle in TestOnePrincipalsFloodLeavesAnotherAlone
// ($MCPDOOR_FLOOD_MAX overrides it). The goal is 2; the bound leaves room
// for what no door can order: the test's own flood client, the HTTP
// server and the embedded bus and worker share the process and the two
// cores of a busy CI machine with the quiet calls (on one at a load
// average of 15 to 20, a flood of requests with no valid token, which
// the door refuses before any work of its own, cost the quiet principal
// 3 to 13 x, and this test's flood 1.4 to 8.5 x: the p99 of a few
// hundred idle calls moves by 3 x from run to run there), and the race
// detector slows all of it unevenly. The door's rate (floodpace.go)
// hardly paces the default flood of 1,000, which stays mostly within
// its burst; a flood of 10,000 it holds to the rate (2.0 x median
// against 5.3 x without, at a load average of 5 to 10), but takes 50 s.
// A lower rate in the test would pace the quiet principal too on a fast
// machine.
func floodBound() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("MCPDOOR_FLOOD_MAX"), 64); err == nil {
		return v
	}
	if raceOn {
		return 16
	}
	return 12
}

// TestOnePrincipalsFloodLeavesAnotherAlone sends a flood of one
// principal's requests (tools/call of a cheap tool in both protocol
// eras, tools/list, malformed JSON, JSON-RPC without a method, bodies
// over the bound; 1,000 by default, the count in $MCPDOOR_FLOOD
// otherwise, 10,000 for issue 36's figure) from $MCPDOOR_FLOOD_CONNS
// connections (32 by default; $MCPDOOR_FLOOD_KEEPALIVE=0 opens one per
// request), while another principal calls a cheap tool sequentially.
// Every flood request must get an HTTP answer with a JSON-RPC body (or
// 202 for what is no call), and every call of the other principal must
// succeed. That principal's p99 under the flood over its p99 idle,
// measured in rounds interleaved with the flood's so that both see the
// same machine, must stay under floodBound; with $MCPDOOR_FLOOD_FIGURE
// set the test prints the figure on stdout (scripts/door-flood.sh).
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
	rate := 0.0 // the door's default
	if v := os.Getenv("MCPDOOR_FLOOD_RATE"); v != "" {
		var err error
		if rate, err = strconv.ParseFloat(v, 64); err != nil {
			t.Fatalf("MCPDOOR_FLOOD_RATE=%q: want requests a second", v)
		}
	}
	door := serveDoor(t, s, mcpdoor.Config{Principals: ps, MaxBodyBytes: maxBody, Rate: rate})
	url := door.URL + mcpdoor.Path

	var (
		total  = 1000
		rounds = 8
		conns  = 32
	)
	if v := os.Getenv("MCPDOOR_FLOOD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < rounds {
			t.Fatalf("MCPDOOR_FLOOD=%q: want a count of requests", v)
		}
		total = n
	}
	if v := os.Getenv("MCPDOOR_FLOOD_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MCPDOOR_FLOOD_CONNS=%q: want a count of connections", v)
		}
		conns = n
	}
	quietClient := &http.Client{Timeout: 30 * time.Second}
	floodClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns,
		DisableKeepAlives: os.Getenv("MCPDOOR_FLOOD_KEEPALIVE") == "0"}, Timeout: 30 * time.Second}
	t.Cleanup(floodClient.CloseIdleConnections)

	send := func(c *http.Client, token, version, method, body string) (int, string, error) {
		req := mcpPost(url, token, version, body)
		if method != "" {
			req.Header.Set("Mcp-Method", method)
			req.Header.Set("Mcp-Name", "echo")
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	quietCall := func() time.Duration {
		t0 := time.Now()
		code, body, err := send(quietClient, "quiet-secret-token", "2025-11-25", "", echoBody)
		d := time.Since(t0)
		if err != nil || code != http.StatusOK || !strings.Contains(body, `"text":"x"`) {
			t.Fatalf("the quiet principal's call: %d %s %v", code, body, err)
		}
		return d
	}

	type floodReq struct{ version, method, body string }
	fast := `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	reqs := []floodReq{
		{"2025-11-25", "", echoBody}, {"2025-11-25", "", echoBody}, {"2025-11-25", "", echoBody},
		{"2026-07-28", "tools/call", fast}, {"2026-07-28", "tools/call", fast}, {"2026-07-28", "tools/call", fast},
		{"2025-11-25", "", listBody},
		{"2025-11-25", "", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":`}, // cut short
		{"2025-11-25", "", `{"jsonrpc":"2.0","id":4,"params":{}}`},                    // no method
		{"2025-11-25", "", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` +
			strings.Repeat("x", maxBody) + `"}}}`},
	}
	// $MCPDOOR_FLOOD_TOKEN floods with another token (one the door does
	// not know: answered 401 before any work of the door's).
	floodToken := "noisy-secret-token"
	if v := os.Getenv("MCPDOOR_FLOOD_TOKEN"); v != "" {
		floodToken = v
	}
	var statuses sync.Map // status -> *atomic.Int64
	// flood sends n requests of the noisy principal from conns
	// goroutines, and fails the test on a request that got no answer or
	// one without a JSON-RPC body.
	flood := func(n int, done chan<- struct{}) {
		defer close(done)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range conns {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					rq := reqs[i%len(reqs)]
					code, body, err := send(floodClient, floodToken, rq.version, rq.method, rq.body)
					if err != nil {
						t.Errorf("a noisy request got no answer: %v", err)
						return
					}
					if code != http.StatusAccepted && code != http.StatusUnauthorized && !strings.Contains(body, `"jsonrpc"`) {
						t.Errorf("a noisy request's answer %d %.200s", code, body)
					}
					v, _ := statuses.LoadOrStore(code, new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
				}
			})
		}
		wg.Wait()
	}

	for range 10 { // warm up: connections, catalogs, streams
		quietCall()
	}
	var idle, loaded []time.Duration
	for r := range rounds {
		for range 30 {
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
	if os.Getenv("MCPDOOR_FLOOD_FIGURE") != "" {
		fmt.Printf("flood: quiet p99 %.1f ms idle, %.1f ms under %s requests of another principal (%d connections): %.2f x\n",
			float64(pi)/1e6, float64(pl)/1e6, thousands(total), conns, ratio)
	}
	if bound := floodBound(); ratio > bound {
		t.Errorf("the quiet principal's p99 under the flood is %.2f x its p99 idle, over the bound %.1f x", ratio, bound)
	}
}

// thousands writes n with a comma between thousands: 10,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
