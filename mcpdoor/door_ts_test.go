package mcpdoor_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/mcpdoor/conformance"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/mcpdoor"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// tsReplica is one door replica: a door on its own NATS connection,
// counting the requests it served.
type tsReplica struct {
	srv    *httptest.Server
	served atomic.Int64
}

func tsDoor(t *testing.T, s *natstest.Server, ps *mcpdoor.Principals, key []byte) *tsReplica {
	t.Helper()
	d, err := mcpdoor.New(mcpdoor.Config{NC: s.Connect(t), Principals: ps, SealKey: key, Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	r := &tsReplica{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.served.Add(1)
		d.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// tsEvent is a line the client script prints.
type tsEvent struct {
	Event    string           `json:"event"`
	Names    []string         `json:"names"`
	Text     string           `json:"text"`
	IsError  bool             `json:"isError"`
	Message  string           `json:"message"`
	Progress []map[string]any `json:"progress"`
	Error    string           `json:"error"`
}

// The TypeScript SDK's client (@modelcontextprotocol/sdk, 2025-11-25)
// against two door replicas behind a proxy that alternates requests, on
// a real worker: it lists the tools, calls one, gets progress, has a call
// held for approval and decided on the fleet (a gateway's Decide, as the
// console does) while its request waits, and cancels a running call with
// notifications/cancelled, which ends the call on the worker.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	node, dir := nodeDeps(t, "ts", "@modelcontextprotocol/sdk")
	nodePath := filepath.Join(dir, "node_modules")
	s := natstest.Start(t)
	workertest.RunWorker(t, s, "ts-w1", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{conformance.Category()}, nil
	})
	const agent, token = "ts-agent", "ts-secret-token-0123456789"
	sum := sha256.Sum256([]byte(token))
	ps, err := mcpdoor.ParsePrincipals(fmt.Appendf(nil,
		`{"principals":[{"name":"ts","token_sha256":["%x"],"agent_id":%q,"approval":["confirm_delete"]}]}`, sum, agent))
	if err != nil {
		t.Fatal(err)
	}
	// The replicas share their sealing key, as a deployment's do: a
	// session id or requestState one seals, the other opens.
	key := make([]byte, mcpdoor.SealKeyBytes)
	rand.Read(key)
	a, b := tsDoor(t, s, ps, key), tsDoor(t, s, ps, key)
	proxy := alternate(t, a.srv, b.srv)

	// The fleet's side: every event of the agent's turns, as a gateway
	// (or the console) sees them.
	nc := s.Connect(t)
	gw, err := gateway.New(nc, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan protocol.Event, 256)
	sub, err := nc.Subscribe(protocol.Subject(protocol.PrefixOutput, agent, "*"), func(m *nats.Msg) {
		if ev, err := gateway.DecodeEvent(m.Subject, m.Data); err == nil {
			events <- ev
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	approveTurn := fmt.Sprintf("ts-approve-%d", time.Now().UnixNano())
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "ts", "client.cjs"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath, "DOOR_URL="+proxy.URL+mcpdoor.Path,
		"DOOR_TOKEN="+token, "APPROVE_TURN="+approveTurn)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan tsEvent)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev tsEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("client printed %q", sc.Text())
				continue
			}
			lines <- ev
		}
	}()

	var (
		mu       sync.Mutex
		got      = map[string]tsEvent{}
		decided  bool
		waitText bool
		slowOut  *protocol.CallOutput
	)
	record := func(ev tsEvent) { mu.Lock(); got[ev.Event] = ev; mu.Unlock() }
	for done := false; !done; {
		select {
		case ev, ok := <-lines:
			if !ok {
				done = true
				break
			}
			record(ev)
			t.Logf("%6.2fs client: %s", time.Since(began).Seconds(), ev.Event)
			switch ev.Event {
			case "approval-progress":
				waitText = waitText || strings.Contains(ev.Message, "approval")
			case "cancelled":
				// The client aborted slow_compute; the call must end on the
				// worker while the client keeps its connection.
				slowOut = tsWaitOutput(t, ctx, events, "slow_compute", 30*time.Second)
				if slowOut == nil {
					io.WriteString(stdin, "not-ended\n")
				} else {
					io.WriteString(stdin, "ended\n")
				}
			}
		case ev := <-events:
			if p, ok := ev.(*protocol.StepPending); ok && p.TurnID == approveTurn && !decided {
				if len(p.Approvals) != 1 || p.Approvals[0].CallID != "delete-1" || p.Approvals[0].Name != "confirm_delete" {
					t.Errorf("pending: %+v", p.Approvals)
				}
				// Decided elsewhere, as the console does.
				if err := gw.Decide(ctx, agent, approveTurn, p.Step, 1, []protocol.Decision{{CallID: "delete-1", Approved: true, Reason: "the ts test approves"}}); err != nil {
					t.Fatal(err)
				}
				decided = true
			}
		case <-ctx.Done():
			t.Fatalf("the client did not finish: %s", stderr.String())
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("client: %v\n%s", err, stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if _, ok := got["done"]; !ok {
		t.Fatalf("the client did not finish its steps: %v\n%s", got, stderr.String())
	}
	if g := got["greet"]; g.Text != "Hello, Ada!" {
		t.Errorf("greet: %+v", g)
	}
	if p := got["progress"].Progress; len(p) < 3 {
		t.Errorf("test_tool_with_progress: %d progress notifications, want 3 or more: %v", len(p), p)
	} else {
		for i := 1; i < len(p); i++ {
			if p[i]["progress"].(float64) < p[i-1]["progress"].(float64) {
				t.Errorf("progress went down: %v", p)
			}
		}
	}
	if !decided {
		t.Error("confirm_delete was never held for approval")
	}
	if !waitText {
		t.Errorf("no progress notification said the call waits for approval: %+v", got["approved"].Progress)
	}
	if ap := got["approved"]; ap.Text != "Deleted /tmp/report.txt" || ap.IsError {
		t.Errorf("confirm_delete after approval: %+v", ap)
	}
	if slowOut == nil {
		t.Error("slow_compute did not end on the worker after the client cancelled it")
	} else if slowOut.Status == protocol.StatusOK {
		t.Errorf("slow_compute ran to its end after the cancel: %s", slowOut.Item)
	}
	if a.served.Load() == 0 || b.served.Load() == 0 {
		t.Errorf("requests per replica: %d and %d, want both served", a.served.Load(), b.served.Load())
	}
	t.Logf("replicas served %d and %d requests; %d tools listed", a.served.Load(), b.served.Load(), len(got["tools"].Names))
}

// tsWaitOutput waits for the call.output of a call of tool name.
func tsWaitOutput(t *testing.T, ctx context.Context, events <-chan protocol.Event, name string, within time.Duration) *protocol.CallOutput {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case ev := <-events:
			if o, ok := ev.(*protocol.CallOutput); ok && o.Name == name {
				return o
			}
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}
