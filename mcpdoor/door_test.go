package mcpdoor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/mcpdoor"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

type echoParams struct {
	Text string `json:"text" jsonschema:"description=What to echo."`
}

type waitParams struct {
	Steps int `json:"steps" jsonschema:"description=How many progress steps.,minimum=0,maximum=20"`
	// HoldMS keeps the call running after its progress, until cancelled.
	Hold bool `json:"hold,omitempty" jsonschema:"description=Keep running until cancelled."`
}

// started counts calls of "wait" that began, and cancelled those whose
// ctx ended before they finished.
type probes struct {
	started, cancelled atomic.Int64
}

func testTools(pr *probes) tool.Category {
	echo := tool.Must(tool.Def[echoParams]{
		Spec: tool.Spec{Name: "echo", Description: "Echo the text.", ReadOnly: true},
		Execute: func(ctx context.Context, p echoParams) (tool.Result, error) {
			return tool.Result{Content: p.Text}, nil
		},
	})
	where := tool.Must(tool.Def[struct{}]{
		Spec: tool.Spec{Name: "where", Description: "Say which turn and step this call is.", ReadOnly: true},
		Execute: func(ctx context.Context, _ struct{}) (tool.Result, error) {
			c, _ := tool.CallFrom(ctx)
			b, _ := json.Marshal(map[string]any{"agent": c.AgentID, "turn": c.TurnID, "step": c.Step, "call": c.CallID})
			return tool.Result{Content: string(b)}, nil
		},
	})
	fail := tool.Must(tool.Def[echoParams]{
		Spec: tool.Spec{Name: "fail", Description: "Fail with the text.", Destructive: true},
		Execute: func(ctx context.Context, p echoParams) (tool.Result, error) {
			return tool.Result{}, tool.Errorf(tool.ToolError, "failed: %s", p.Text)
		},
	})
	wait := tool.Must(tool.Def[waitParams]{
		Spec: tool.Spec{Name: "wait", Description: "Report progress, and optionally run until cancelled."},
		Execute: func(ctx context.Context, p waitParams) (tool.Result, error) {
			pr.started.Add(1)
			for i := range p.Steps {
				tool.ReportProgress(ctx, int64(i+1), int64(p.Steps), fmt.Sprintf("step %d", i+1))
				select {
				case <-time.After(300 * time.Millisecond): // the worker sends a few progress events a second
				case <-ctx.Done():
					pr.cancelled.Add(1)
					return tool.Result{}, ctx.Err()
				}
			}
			if p.Hold {
				<-ctx.Done()
				pr.cancelled.Add(1)
				return tool.Result{}, ctx.Err()
			}
			return tool.Result{Content: "done"}, nil
		},
	})
	all := []*tool.Tool{echo, where, fail, wait}
	return tool.Category{Name: "door_test", Tools: func(context.Context, tool.Turn) ([]*tool.Tool, error) { return all, nil }}
}

// fleet is an embedded NATS server with one real worker serving the test
// tools.
func fleet(t *testing.T) (*natstest.Server, *probes) {
	t.Helper()
	s := natstest.Start(t)
	pr := &probes{}
	workertest.RunWorker(t, s, "w1", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{testTools(pr)}, nil
	})
	return s, pr
}

// serveDoor starts a door on its own NATS connection, on loopback.
func serveDoor(t *testing.T, s *natstest.Server, cfg mcpdoor.Config) *httptest.Server {
	t.Helper()
	cfg.NC = s.Connect(t)
	cfg.Logger = workertest.Logger()
	d, err := mcpdoor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(d)
	t.Cleanup(hs.Close)
	return hs
}

// alternate is a proxy that sends each request to the next replica.
func alternate(t *testing.T, replicas ...*httptest.Server) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	var proxies []*httputil.ReverseProxy
	for _, r := range replicas {
		u, _ := url.Parse(r.URL)
		p := httputil.NewSingleHostReverseProxy(u)
		p.FlushInterval = -1
		proxies = append(proxies, p)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxies[int(n.Add(1)-1)%len(proxies)].ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

func connect(t *testing.T, endpoint string, client *http.Client) *mcp.ClientSession {
	t.Helper()
	return connectOpts(t, endpoint, client, nil)
}

// clientWith connects with a bearer token and client options.
func clientWith(t *testing.T, endpoint, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectOpts(t, endpoint, &http.Client{Transport: bearer{token}}, opts)
}

func connectOpts(t *testing.T, endpoint string, client *http.Client, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "door-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint + mcpdoor.Path, HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content %T, want text", c)
		}
		b.WriteString(tc.Text)
	}
	return b.String()
}

func TestListAndCall(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	door := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"})
	cs := connect(t, door.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	if got, want := strings.Join(names, ","), "echo,fail,wait,where"; got != want {
		t.Fatalf("tools %s, want %s", got, want)
	}
	if a := lt.Tools[0].Annotations; a == nil || !a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint {
		t.Errorf("echo's annotations %+v, want read-only", a)
	}
	if a := lt.Tools[1].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("fail's annotations %+v, want destructive", a)
	}
	schema, _ := json.Marshal(lt.Tools[0].InputSchema)
	if !strings.Contains(string(schema), `"What to echo."`) {
		t.Errorf("echo's schema %s lacks its description", schema)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello door"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || text(t, res) != "hello door" {
		t.Fatalf("echo: isError %v, %q", res.IsError, text(t, res))
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{"text": "on purpose"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(t, res), "failed: on purpose") {
		t.Fatalf("fail: isError %v, %q", res.IsError, text(t, res))
	}

	// Arguments the schema refuses come back as the model would read them.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": 7}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError {
		t.Fatalf("echo with a number: not an error: %q", text(t, res))
	}

	// A JSON object's text is also structured content.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "where", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	sc, ok := res.StructuredContent.(map[string]any)
	if !ok || sc["agent"] != "dev" || sc["step"] != float64(0) {
		t.Fatalf("where: structured %#v", res.StructuredContent)
	}
	if turn, _ := sc["turn"].(string); !strings.HasPrefix(turn, "mcp-") {
		t.Errorf("an unnamed call's turn is %q", turn)
	}
}

// TestTwoReplicasNamedTurn alternates two doors per request: the client
// lists and calls with no affinity, and a named turn's steps are
// numbered 0, 1, 2, … across both replicas.
func TestTwoReplicasNamedTurn(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	a := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"})
	b := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"})
	proxy := alternate(t, a, b)
	cs := connect(t, proxy.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "where", Arguments: map[string]any{},
			Meta: mcp.Meta{mcpdoor.MetaTurn: "my-turn"}})
		if err != nil {
			t.Fatal(err)
		}
		sc, _ := res.StructuredContent.(map[string]any)
		if sc["turn"] != "my-turn" || sc["step"] != float64(i) {
			t.Fatalf("call %d: %v (%q)", i, sc, text(t, res))
		}
	}
}

// TestNamedTurnStepsConcurrent gives 20 concurrent calls of one named
// turn, through two replicas, 20 distinct step numbers.
func TestNamedTurnStepsConcurrent(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	a := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"})
	b := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"})
	proxy := alternate(t, a, b)
	cs := connect(t, proxy.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const n = 20
	var mu sync.Mutex
	seen := map[float64]bool{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "where", Arguments: map[string]any{},
				Meta: mcp.Meta{mcpdoor.MetaTurn: "busy"}})
			if err != nil {
				t.Error(err)
				return
			}
			sc, _ := res.StructuredContent.(map[string]any)
			step, _ := sc["step"].(float64)
			mu.Lock()
			defer mu.Unlock()
			if seen[step] {
				t.Errorf("step %v given twice", step)
			}
			seen[step] = true
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d distinct steps, want %d", len(seen), n)
	}
}

// TestProgress: a call with a progress token gets the call's activity as
// increasing progress notifications.
func TestProgress(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	door := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"})
	var mu sync.Mutex
	var got []float64
	c := mcp.NewClient(&mcp.Implementation{Name: "door-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if r.Params.ProgressToken == "p1" {
				got = append(got, r.Params.Progress)
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: door.URL + mcpdoor.Path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{"steps": 3}, Meta: mcp.Meta{"progressToken": "p1"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 3 {
		t.Fatalf("progress %v, want at least 3 notifications", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			t.Fatalf("progress went back: %v", got)
		}
	}
	if got[len(got)-1] != 3 {
		t.Fatalf("progress %v does not end at 3", got)
	}
}

// TestTraceFromMeta: a traceparent in _meta reaches the step's NATS
// headers.
func TestTraceFromMeta(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	door := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev"})
	nc := s.Connect(t)
	got := make(chan string, 1)
	sub, err := nc.Subscribe(protocol.PrefixCall+".dev.>", func(m *nats.Msg) { got <- m.Header.Get("traceparent") })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	cs := connect(t, door.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}, Meta: mcp.Meta{"traceparent": tp}}); err != nil {
		t.Fatal(err)
	}
	if h := <-got; !strings.HasPrefix(h, "00-0af7651916cd43dd8448eb211c80319c-") {
		t.Fatalf("traceparent header %q", h)
	}
}
