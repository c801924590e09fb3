package mcpdoor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/mcpdoor"
	"github.com/agentbull/toolruntime/protocol"
)

var sealKey = []byte("0123456789abcdef0123456789abcdef")

const approvalPrincipals = `{"principals":[
	{"name":"alice","token_sha256":[%q],"agent_id":"agent-alice","approval":["wait"]},
	{"name":"bob","token_sha256":[%q],"agent_id":"agent-bob","approval":["wait"]}]}`

func approvalDoors(t *testing.T) (*mcpdoor.Principals, string, *probes, *nats.Conn) {
	s, pr := fleet(t)
	ps := principals(t, fmt.Sprintf(approvalPrincipals, hash("alice-secret-token"), hash("bob-secret-token")))
	a := serveDoor(t, s, mcpdoor.Config{Principals: ps, SealKey: sealKey})
	b := serveDoor(t, s, mcpdoor.Config{Principals: ps, SealKey: sealKey})
	return ps, alternate(t, a, b).URL, pr, s.Connect(t)
}

// TestApprovalMRTR: a 2026-07-28 client with elicitation answers a held
// call's input_required on its retry, through two replicas alternated.
func TestApprovalMRTR(t *testing.T) {
	t.Parallel()
	_, url, pr, _ := approvalDoors(t)
	approve := true
	cs := clientWith(t, url, "alice-secret-token", &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if !strings.Contains(r.Params.Message, "wait") {
				return nil, fmt.Errorf("message %q", r.Params.Message)
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": approve}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{"steps": 0}})
	if err != nil || res.IsError || text(t, res) != "done" {
		t.Fatalf("approved: %v %+v", err, res)
	}
	if pr.started.Load() != 1 {
		t.Fatalf("%d runs", pr.started.Load())
	}
	approve = false
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{"steps": 0}})
	if err != nil || !res.IsError {
		t.Fatalf("refused: %v %+v", err, res)
	}
	if pr.started.Load() != 1 {
		t.Fatalf("a refused call ran: %d runs", pr.started.Load())
	}
}

// TestApprovalStateChecks: a requestState that is forged, another
// principal's or for other arguments runs nothing; a replay decides
// nothing new and reads the same outcome.
func TestApprovalStateChecks(t *testing.T) {
	t.Parallel()
	_, url, pr, _ := approvalDoors(t)
	noMRTR := &mcp.ClientOptions{
		MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, fmt.Errorf("unused") },
	}
	alice := clientWith(t, url, "alice-secret-token", noMRTR)
	bob := clientWith(t, url, "bob-secret-token", noMRTR)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := map[string]any{"steps": 0}
	held, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: args})
	if err != nil || !held.NeedsInput() || held.RequestState == "" {
		t.Fatalf("held call: %v %+v", err, held)
	}
	yes := mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
	st := held.RequestState
	for _, c := range []struct {
		name string
		cs   *mcp.ClientSession
		args map[string]any
		st   string
	}{
		{"forged", alice, args, st[:len(st)-2] + "AA"},
		{"garbage", alice, args, "not-a-state"},
		{"other principal", bob, args, st},
		{"other arguments", alice, map[string]any{"steps": 1}, st},
	} {
		_, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: c.args, RequestState: c.st, InputResponses: yes})
		if err == nil || !strings.Contains(err.Error(), "invalid requestState") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if n := pr.started.Load(); n != 0 {
		t.Fatalf("%d runs after refused states", n)
	}
	for i := range 2 { // the answer, then its replay
		res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: args, RequestState: st, InputResponses: yes})
		if err != nil || res.IsError || text(t, res) != "done" {
			t.Fatalf("answer %d: %v %+v", i, err, res)
		}
	}
	if n := pr.started.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

// TestApprovalWait: a 2025-11-25 client's held call waits, with
// progress, for a decision made elsewhere (here a gateway).
func TestApprovalWait(t *testing.T) {
	t.Parallel()
	_, url, pr, nc := approvalDoors(t)
	gw, err := gateway.New(nc, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pending := make(chan *protocol.StepPending, 1)
	sub, err := nc.Subscribe(protocol.PrefixOutput+".agent-alice.>", func(m *nats.Msg) {
		if ev, err := gateway.DecodeEvent(m.Subject, m.Data); err == nil {
			if p, ok := ev.(*protocol.StepPending); ok {
				pending <- p
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	go func() {
		p := <-pending
		_ = gw.Decide(context.Background(), p.AgentID, p.TurnID, p.Step, 1, []protocol.Decision{{CallID: p.Approvals[0].CallID, Approved: true}})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A client without elicitation is asked nothing: its request waits.
	cs := clientWith(t, url, "alice-secret-token", nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{"steps": 0}})
	if err != nil || res.IsError || text(t, res) != "done" {
		t.Fatalf("%v %+v", err, res)
	}
	if pr.started.Load() != 1 {
		t.Fatalf("%d runs", pr.started.Load())
	}
}
