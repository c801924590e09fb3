package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/protocol"
)

// catalogSlow has one agent ask for a catalog that enables the MCP server
// o.catalogSlow (configured on the worker with a slow start) while
// o.burstOpts.quiet agents ask for catalogs of their own back to back,
// each on its own connection, and reports the quiet agents' latency
// before (for --idle) and while the slow request waited.
func catalogSlow(ctx context.Context, url string, o options) error {
	q := o.burstOpts.quiet
	var (
		mu         sync.Mutex
		idle, slow []time.Duration
		failures   []string
		phase      atomic.Int32 // 0 idle, 1 the slow request waits, 2 over
	)
	ask := func(nc *nats.Conn, agent, turnID string, servers []string) (time.Duration, []byte, error) {
		body, _ := json.Marshal(protocol.CatalogRequest{AgentID: agent, TurnID: turnID,
			Context: protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{diagnostics.Binding: true}, MCPServers: servers}})
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		t0 := time.Now()
		m, err := nc.RequestWithContext(rctx, protocol.SubjectTools, body)
		d := time.Since(t0)
		if err == nil && m.Header.Get("Nats-Service-Error-Code") != "" {
			err = fmt.Errorf("%s %s", m.Header.Get("Nats-Service-Error-Code"), m.Header.Get("Nats-Service-Error"))
		}
		if err != nil {
			return d, nil, err
		}
		return d, m.Data, nil
	}
	var wg sync.WaitGroup
	for a := range q {
		nc, err := nats.Connect(url, nats.Name(fmt.Sprintf("loadgen-catalog-%d", a)))
		if err != nil {
			return err
		}
		defer nc.Close()
		wg.Go(func() {
			agent := fmt.Sprintf("quiet-%d", a)
			for i := 0; ctx.Err() == nil; i++ {
				p := phase.Load()
				if p == 2 {
					return
				}
				d, _, err := ask(nc, agent, fmt.Sprintf("t%d", i), nil)
				mu.Lock()
				if err != nil {
					failures = append(failures, agent+": "+err.Error())
				} else if p == 0 {
					idle = append(idle, d)
				} else if phase.Load() == 1 { // the whole request inside the slow one's wait
					slow = append(slow, d)
				}
				mu.Unlock()
			}
		})
	}
	defer wg.Wait()
	defer phase.Store(2)
	if err := sleepCtx(ctx, o.burstOpts.idle); err != nil {
		return err
	}
	sc, err := nats.Connect(url, nats.Name("loadgen-catalog-slow"))
	if err != nil {
		return err
	}
	defer sc.Close()
	phase.Store(1)
	took, data, err := ask(sc, "slow", "t0", []string{o.catalogSlow})
	phase.Store(2)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("the slow turn's catalog request: %w", err)
	}
	// A start slower than one request's wait is up for the next one.
	again, data2, err := ask(sc, "slow", "t0", []string{o.catalogSlow})
	if err != nil {
		return fmt.Errorf("the slow turn's second catalog request: %w", err)
	}
	for i, d := range [][]byte{data, data2} {
		var reply protocol.CatalogReply
		if err := json.Unmarshal(d, &reply); err != nil {
			return fmt.Errorf("the slow turn's catalog %s: %w", d, err)
		}
		what := fmt.Sprintf("catalog with MCP server %q: %s", o.catalogSlow, took.Round(time.Millisecond))
		if i == 1 {
			what = fmt.Sprintf("asked again at once: %s", again.Round(time.Millisecond))
		}
		fmt.Fprintf(o.out, "%s (its namespace in the reply: %t, notes %q)\n", what, strings.Contains(string(reply.Tools), `"name":"`+o.catalogSlow+`"`), reply.Notes)
	}
	ip50, ip99, _ := percentiles(idle)
	p50, p99, most := percentiles(slow)
	fmt.Fprintf(o.out, "other agents' catalogs (%d agents, back to back) idle: n=%d p50=%s p99=%s\n", q, len(idle), ip50.Round(10*time.Microsecond), ip99.Round(10*time.Microsecond))
	fmt.Fprintf(o.out, "other agents' catalogs while it started: n=%d p50=%s p99=%s max=%s errors=%d\n", len(slow), p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), most.Round(10*time.Microsecond), len(failures))
	if len(failures) > 0 {
		return fmt.Errorf("%d catalog requests failed, the first: %s", len(failures), failures[0])
	}
	return nil
}
