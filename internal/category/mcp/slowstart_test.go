package mcp_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/protocol"
)

// A turn that enables an MCP server whose start is slow (a real child
// process that reads nothing, initialize included, until the test lets
// it: an npx fetching the server) delays only its own catalog: other
// agents' catalog requests to the same worker are answered while it is
// still starting, and the slow turn then gets the server's tools. A
// second request of the slow turn waits for the same start instead of
// starting another process.
func TestSlowMCPStartDelaysOnlyItsTurn(t *testing.T) {
	t.Parallel()
	cfg, marks := stdioConfig(t)
	hold := filepath.Join(t.TempDir(), "go")
	cfg.Env[holdEnv] = hold
	other, _ := stdioConfig(t) // a quick server that other agents enable
	r := startRig(t, map[string]mcp.ServerConfig{"slow": cfg, "quick": other})
	r.catalog(protocol.Context{Kind: protocol.KindText}) // the service is up

	request := func(agent string, servers ...string) <-chan *nats.Msg {
		body, _ := json.Marshal(protocol.CatalogRequest{AgentID: agent, TurnID: "t1",
			Context: protocol.Context{Kind: protocol.KindText, MCPServers: servers}})
		ch := make(chan *nats.Msg, 1)
		go func() {
			m, err := r.nc.Request(protocol.SubjectTools, body, time.Minute)
			if err != nil {
				t.Errorf("%s's catalog request: %v", agent, err)
				close(ch)
				return
			}
			ch <- m
		}()
		return ch
	}
	slow := request("slowagent", "slow")
	slowAgain := request("slowagent", "slow")
	waitMark(t, marks, "waiting") // the slow server's process is up, not answering
	for i, agent := range []string{"b1", "b2", "b3", "b4", "b5", "b6"} {
		var servers []string
		if i%2 == 0 {
			servers = []string{"quick"}
		}
		m := <-request(agent, servers...)
		if m == nil {
			return
		}
		names := catalogNames(t, m.Data)
		if i%2 == 0 && !strings.Contains(names, "quick") {
			t.Errorf("%s's catalog has no quick tools: %s", agent, names)
		}
		select {
		case m := <-slow:
			t.Fatalf("the slow turn was answered before its server started: %s", m.Data)
		default:
		}
	}
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan *nats.Msg{slow, slowAgain} {
		m := <-ch
		if m == nil {
			return
		}
		if names := catalogNames(t, m.Data); !strings.Contains(names, "slow") {
			t.Errorf("the slow turn's catalog lacks the slow server's tools: %s", names)
		}
	}
	if got := strings.Count(strings.Join(readMarks(marks), " "), "waiting"); got != 1 {
		t.Errorf("the slow server was started %d times, want once", got)
	}
}

// catalogNames lists a catalog reply's namespaces and tools, for messages
// and contains-checks.
func catalogNames(t *testing.T, data []byte) string {
	t.Helper()
	var reply protocol.CatalogReply
	if err := json.Unmarshal(data, &reply); err != nil {
		t.Fatalf("reply %s: %v", data, err)
	}
	var entries []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(reply.Tools, &entries); err != nil {
		t.Fatalf("tools %s: %v", reply.Tools, err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	return strings.Join(names, " ")
}
