package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// progressLog is a call's progress listener: it keeps every report and
// says when one with the awaited label arrives.
type progressLog struct {
	mu      sync.Mutex
	reports []progressReport
	await   string
	seen    chan struct{}
	once    sync.Once
}

type progressReport struct {
	done, total int64
	label       string
}

func newProgressLog(await string) *progressLog {
	return &progressLog{await: await, seen: make(chan struct{})}
}

func (l *progressLog) report(done, total int64, label string) {
	l.mu.Lock()
	l.reports = append(l.reports, progressReport{done, total, label})
	l.mu.Unlock()
	if label == l.await {
		l.once.Do(func() { close(l.seen) })
	}
}

func (l *progressLog) all() []progressReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]progressReport(nil), l.reports...)
}

type countIn struct {
	N       int     `json:"n" jsonschema:"how many notifications"`
	Total   float64 `json:"total,omitempty" jsonschema:"the total to send"`
	Step    float64 `json:"step,omitempty" jsonschema:"progress added per notification (1 when 0)"`
	Hostile bool    `json:"hostile,omitempty" jsonschema:"send bad notifications first"`
}

// newProgressServer is a Go MCP server whose count tool sends progress
// notifications for the request's token, then the notification "final",
// then waits until the test has seen it (the SDK hands notifications to
// the client on another goroutine than the response, so a call that
// answered at once could outrun its last notification).
func newProgressServer(seen func() <-chan struct{}) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "progress", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "count", Description: "Count, reporting progress.", Annotations: readOnly},
		func(ctx context.Context, req *sdk.CallToolRequest, in countIn) (*sdk.CallToolResult, any, error) {
			token := req.Params.GetProgressToken()
			if token == nil {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "no progress token"}}}, nil, nil
			}
			send := func(token any, progress, total float64, msg string) error {
				return req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: progress, Total: total, Message: msg})
			}
			if in.Hostile {
				for _, bad := range []struct {
					token           any
					progress, total float64
					msg             string
				}{
					{"tr-999999", 5, 10, "a token of no call"},
					{1, 5, 10, "a number token"},
					{token, -3, 10, "negative"},
					{token, 50, 10, strings.Repeat("huge ", 200_000)},
					{token, 40, 10, "went back"},
				} {
					if err := send(bad.token, bad.progress, bad.total, bad.msg); err != nil {
						return nil, nil, err
					}
				}
			}
			step := in.Step
			if step == 0 {
				step = 1
			}
			p := 0.0
			if in.Hostile {
				p = 50
			}
			for i := 1; i <= in.N; i++ {
				p += step
				if err := send(token, p, in.Total, fmt.Sprintf("step %d", i)); err != nil {
					return nil, nil, err
				}
			}
			if err := send(token, p, in.Total, "final"); err != nil {
				return nil, nil, err
			}
			select {
			case <-seen():
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "counted"}}}, nil, nil
		})
	return srv
}

// runWithProgress runs one call of the server's tool, with log as its
// progress listener when log is not nil.
func runWithProgress(t *testing.T, m *mcp.Manager, server, name, args string, log *progressLog) string {
	t.Helper()
	set := assemble(t, m, textContext(server))
	tl := set.Lookup(server, name)
	if tl == nil {
		t.Fatalf("no tool %s.%s; notes %q", server, name, set.Notes)
	}
	inv, err := tools.Prepare(tl, args, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if log != nil {
		ctx = tools.WithProgress(ctx, log.report)
	}
	res, err := inv.Run(tools.WithCall(ctx, tool.Call{AgentID: "a1", TurnID: "t1", CallID: "c1"}))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res.Content
}

func startProgressServer(t *testing.T, log **progressLog) *mcp.Manager {
	t.Helper()
	srv := newProgressServer(func() <-chan struct{} { return (*log).seen })
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return newManager(t, map[string]mcp.ServerConfig{"prog": {URL: hs.URL}})
}

// A call with a listener asks for progress, and the server's
// notifications reach the listener in order, with their totals and
// messages; fractions are reported in thousandths.
func TestMCPProgress(t *testing.T) {
	t.Parallel()
	var log *progressLog
	m := startProgressServer(t, &log)
	t.Run("counts", func(t *testing.T) {
		log = newProgressLog("final")
		if out := runWithProgress(t, m, "prog", "count", `{"n":5,"total":5}`, log); !strings.Contains(out, "counted") {
			t.Fatalf("output %q", out)
		}
		got := log.all()
		want := []progressReport{{1, 5, "step 1"}, {2, 5, "step 2"}, {3, 5, "step 3"}, {4, 5, "step 4"}, {5, 5, "step 5"}, {5, 5, "final"}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("reports %v, want %v", got, want)
		}
	})
	t.Run("fractions", func(t *testing.T) {
		log = newProgressLog("final")
		runWithProgress(t, m, "prog", "count", `{"n":4,"total":1,"step":0.25}`, log)
		got := log.all()
		want := []progressReport{{250, 1000, "step 1"}, {500, 1000, "step 2"}, {750, 1000, "step 3"}, {1000, 1000, "step 4"}, {1000, 1000, "final"}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("reports %v, want %v", got, want)
		}
	})
	// Bad notifications are dropped or bounded; a flood all arrives, in
	// order (the dispatcher's reporter is what rate-limits).
	t.Run("hostile", func(t *testing.T) {
		log = newProgressLog("final")
		runWithProgress(t, m, "prog", "count", `{"n":3000,"hostile":true}`, log)
		got := log.all()
		if len(got) != 3000+2 {
			t.Fatalf("%d reports, want the huge one, 3000 and final", len(got))
		}
		if h := got[0]; h.done != 50 || h.total != 0 || len(h.label) > 512 || !strings.HasPrefix(h.label, "huge huge") {
			t.Fatalf("the huge notification became %d/%d with a %d byte label", h.done, h.total, len(h.label))
		}
		for i, r := range got[1 : len(got)-1] {
			if r.done != int64(51+i) || r.label != fmt.Sprintf("step %d", i+1) {
				t.Fatalf("report %d: %+v", i+1, r)
			}
		}
	})
	// Nobody listens: no token is sent, and the server has nothing to
	// report to.
	t.Run("no listener", func(t *testing.T) {
		log = newProgressLog("final")
		if out := runWithProgress(t, m, "prog", "count", `{"n":3}`, nil); !strings.Contains(out, "no progress token") {
			t.Fatalf("output %q", out)
		}
	})
}

// server-everything's trigger-long-running-operation sends a progress
// notification per step: they arrive with its totals, in order.
func TestEverythingProgress(t *testing.T) {
	t.Parallel()
	npmDir(t)
	m := newManager(t, map[string]mcp.ServerConfig{"everything": everythingStdio(t)})
	log := newProgressLog("")
	out := runWithProgress(t, m, "everything", "trigger-long-running-operation", `{"duration":1,"steps":4}`, log)
	if !strings.Contains(out, "Long running operation completed") {
		t.Fatalf("output %q", out)
	}
	got := log.all()
	// The SDK hands over the last notifications on another goroutine than
	// the response: the call may end before them, so only a prefix of the
	// steps is certain to have arrived.
	if len(got) == 0 || len(got) > 4 {
		t.Fatalf("reports %+v", got)
	}
	for i, r := range got {
		if r.done != int64(i+1) || r.total != 4 {
			t.Fatalf("report %d: %+v", i, r)
		}
	}
	t.Logf("reports %+v", got)
}

// Over NATS, as a gateway sees it: an MCP tool that floods progress
// notifications streams progress events at most one per interval, in
// order, the latest one ("final") sent while the tool waits, and nothing
// after completed.
func TestMCPProgressOverNATS(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	srv := newProgressServer(func() <-chan struct{} { return gate })
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	m := newManager(t, map[string]mcp.ServerConfig{"prog": {URL: hs.URL, Defer: new(false)}})
	s := natstest.Start(t)
	workertest.RunWorker(t, s, "w1", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{mcp.Category(m, nil)}, nil
	})
	g := workertest.NewGateway(t, s)
	sub, err := g.NC.SubscribeSync(protocol.Subject(protocol.PrefixActive, "a1", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	events := make(chan []protocol.Activity, 1)
	// A second "final" (a loaded host can deliver one) must not close
	// the gate twice: what the events say is checked below.
	closeGate := sync.OnceFunc(func() { close(gate) })
	go func() {
		var got []protocol.Activity
		defer func() { events <- got }()
		for {
			msg, err := sub.NextMsg(time.Minute)
			if err != nil {
				return
			}
			var a protocol.Activity
			if json.Unmarshal(msg.Data, &a) != nil {
				return
			}
			got = append(got, a)
			if a.State == protocol.ActivityProgress && a.Label == "final" {
				closeGate()
			}
			if a.State == protocol.ActivityCompleted {
				return
			}
		}
	}()
	start := time.Now()
	outs := g.RunStep(protocol.PrefixCall, "a1", "t1", 0, protocol.Context{Kind: protocol.KindText, MCPServers: []string{"prog"}},
		workertest.NsFC("prog", "c1", "count", `{"n":5000,"total":5000}`))
	elapsed := time.Since(start)
	if o := outs["c1"]; o.Status != "ok" {
		t.Fatalf("call.output %s", o.Raw)
	}
	got := <-events
	if m, err := sub.NextMsg(3 * turn.ProgressInterval); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("after completed: %v %v", err, m)
	}
	if len(got) < 3 || got[0].State != protocol.ActivityStarted || got[len(got)-1].State != protocol.ActivityCompleted {
		t.Fatalf("events %+v", got)
	}
	progress := got[1 : len(got)-1]
	if bound := int(elapsed/turn.ProgressInterval) + 2; len(progress) > bound {
		t.Fatalf("%d progress events in %v, over the bound of %d", len(progress), elapsed, bound)
	}
	var prev int64
	for _, a := range progress {
		p := a.Progress
		if a.State != protocol.ActivityProgress || a.Name != "count" || p == nil || p.Done < prev || p.Total == nil || *p.Total != 5000 {
			t.Fatalf("event %+v after done %d", a, prev)
		}
		prev = p.Done
	}
	if last := progress[len(progress)-1]; last.Label != "final" || last.Progress.Done != 5000 {
		t.Fatalf("last progress %+v", last)
	}
	t.Logf("%d progress events in %v for 5001 notifications", len(progress), elapsed)
}
