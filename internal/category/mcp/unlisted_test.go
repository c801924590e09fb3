package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/protocol"
)

// catalogOf is the catalog of agent's turn (fairness key fair) enabling
// acct: the functions in acct's namespace, and the notes.
func (r *authRig) catalogOf(agent, fair string) ([]string, string) {
	r.t.Helper()
	gw, err := gateway.New(r.nc, gateway.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tc := protocol.Context{Kind: "text", MCPServers: []string{"acct"}, Fairness: protocol.Fairness{Key: fair}}
	reply, err := gw.Catalog(ctx, agent, "t1", tc)
	for errors.Is(err, nats.ErrNoResponders) && ctx.Err() == nil { // the worker's service is starting
		time.Sleep(50 * time.Millisecond)
		reply, err = gw.Catalog(ctx, agent, "t1", tc)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	var entries []struct {
		Name  string `json:"name"`
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reply.Tools, &entries); err != nil {
		r.t.Fatalf("catalog %s: %v", reply.Tools, err)
	}
	var names []string
	for _, e := range entries {
		for _, f := range e.Tools {
			if e.Name == "acct" {
				names = append(names, f.Name)
			}
		}
	}
	return names, strings.Join(reply.Notes, "\n")
}

// needsAccount checks that evs are an auth.required event for owner's
// account and a call.output of kind auth_required.
func needsAccount(t *testing.T, what string, evs []outEvent, owner string) {
	t.Helper()
	if len(evs) != 3 || evs[0].Type != protocol.EventAuthRequired || evs[1].Type != protocol.EventCallOutput {
		t.Fatalf("%s: events %+v", what, evs)
	}
	ar, out := evs[0], evs[1]
	if ar.Server != "acct" || ar.CallID != "c1" {
		t.Fatalf("%s: auth.required %+v", what, ar)
	}
	if u, err := url.Parse(ar.URL); err != nil || u.Host != "console.example" || u.Query().Get("key") != owner || u.Query().Get("server") != "acct" {
		t.Fatalf("%s: auth.required url %q", what, ar.URL)
	}
	if out.Status != "error" || out.Error == nil || out.Error.Kind != string(protocol.AuthRequired) || !strings.Contains(out.Error.Message, "connect an account") {
		t.Fatalf("%s: call.output %+v", what, out)
	}
}

func unknownTool(t *testing.T, what string, evs []outEvent) {
	t.Helper()
	for _, ev := range evs {
		if ev.Type == protocol.EventAuthRequired {
			t.Fatalf("%s: an auth.required event: %+v", what, evs)
		}
	}
	if out := callOutput(t, evs); out.Error == nil || out.Error.Kind != string(protocol.UnknownTool) {
		t.Fatalf("%s: call.output %+v", what, out)
	}
}

// On a fresh worker, with no account ever connected (so no one ever
// listed acct): the catalog offers acct.connect_account and a note; a
// call of any name of acct ends auth_required with the auth.required
// event and its link (not unknown_tool); a name outside acct stays
// unknown. Once the account is connected the next call works, with no
// restart; another tenant still needs its own account, and its calls
// never carry the first one's token.
func TestNeverListedServerNeedsAnAccount(t *testing.T) {
	w := newOAuthWorld(t)
	r := startAuthRig(t, w, mcp.OAuthConfig{Owner: mcp.OwnerFairness})
	ctx := context.Background()
	ownerA := mcp.OwnerFor(r.cfg.Servers["acct"].OAuth, "a1", "tenant-A")
	ownerB := mcp.OwnerFor(r.cfg.Servers["acct"].OAuth, "b1", "tenant-B")

	names, notes := r.catalogOf("b1", "tenant-B")
	if !slices.Equal(names, []string{mcp.ConnectTool}) {
		t.Fatalf("tenant B's catalog of acct: %q (notes %s)", names, notes)
	}
	if !strings.Contains(notes, "needs a person to connect an account") || !strings.Contains(notes, "acct."+mcp.ConnectTool) {
		t.Fatalf("tenant B's catalog notes: %s", notes)
	}

	needsAccount(t, "acct.whoami, never listed", r.stepCall("b1", "tenant-B", "t1", 0, "acct", "whoami"), ownerB)
	needsAccount(t, "acct.anything", r.stepCall("b1", "tenant-B", "t1", 1, "acct", "anything"), ownerB)
	needsAccount(t, "acct."+mcp.ConnectTool, r.stepCall("b1", "tenant-B", "t1", 2, "acct", mcp.ConnectTool), ownerB)
	unknownTool(t, "other.whoami", r.stepCall("b1", "tenant-B", "t1", 3, "other", "whoami"))
	unknownTool(t, "whoami without a namespace", r.stepCall("b1", "tenant-B", "t1", 4, "", "whoami"))
	unknownTool(t, "a name no tool may have", r.stepCall("b1", "tenant-B", "t1", 5, "acct", "who am i"))

	// B connects as bob: the next call works, on the same worker.
	if err := r.conn.Connect(ctx, "acct", ownerB, browser("bob")); err != nil {
		t.Fatal(err)
	}
	if out := callOutput(t, r.stepCall("b1", "tenant-B", "t1", 6, "acct", "whoami")); out.Status != "ok" || outputText(t, out) != "you are bob" {
		t.Fatalf("tenant B after connecting: %+v %s", out, out.Item)
	}
	if names, _ := r.catalogOf("b1", "tenant-B"); !slices.Contains(names, "whoami") || slices.Contains(names, mcp.ConnectTool) {
		t.Fatalf("tenant B's catalog after connecting: %q", names)
	}

	// Another tenant is unaffected: it still needs its own account, then
	// its calls carry its own token.
	needsAccount(t, "tenant A", r.stepCall("a1", "tenant-A", "t1", 0, "acct", "whoami"), ownerA)
	if err := r.conn.Connect(ctx, "acct", ownerA, browser("alice")); err != nil {
		t.Fatal(err)
	}
	if out := callOutput(t, r.stepCall("a1", "tenant-A", "t1", 1, "acct", "whoami")); out.Status != "ok" || outputText(t, out) != "you are alice" {
		t.Fatalf("tenant A after connecting: %+v %s", out, out.Item)
	}
	if got := strings.Join(w.users(), ","); got != "bob,alice" {
		t.Fatalf("the server saw the tokens of %s, want bob,alice", got)
	}
	r.noTokenOnTheWire()
}
