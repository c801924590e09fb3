package openai_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentbull/toolruntime/protocol"
)

// want is what one call must end with: "ok" or an error kind.
type want struct {
	step    int
	outcome string
}

// TestOutputItemsRoundTrip runs steps that end in every outcome a gateway
// can see without approvals (ok, and the error kinds unknown_tool,
// not_loaded, invalid_arguments, tool_error, timeout, aborted) and a
// client tool search that loads deferred tools, on the real worker. Every
// item of every step.done (and of every call.output) unmarshals into
// responses.ResponseInputItemUnionParam as the variant its type names and
// marshals back to equal JSON; passed on with param.Override, the items
// reach the next request's input byte for byte.
func TestOutputItemsRoundTrip(t *testing.T) {
	f := startFleet(t)
	ctx := allContext()
	ns := mcpServer
	expect := map[string]want{}
	var items []json.RawMessage
	var events []event
	run := func(turn string, n int, output ...any) (map[string]event, event) {
		outs, done := f.publish(t, "a1", turn, n, ctx, output...).wait(t)
		items = append(items, done.Items...)
		for _, o := range outs {
			events = append(events, o)
		}
		return outs, done
	}

	// Step 0: outcomes that need nothing loaded.
	expect["ok"] = want{0, "ok"}
	expect["ok_ns"] = want{0, "ok"}
	expect["unknown"] = want{0, "unknown_tool"}
	expect["not_loaded"] = want{0, "not_loaded"}
	expect["invalid"] = want{0, "invalid_arguments"}
	expect["missing_file"] = want{0, "tool_error"}
	run("items", 0,
		call("ok", "ping", `{"note":"hi <there> & \"you\""}`),
		nsCall("ok_ns", ns, "echo", `{"text":"ünïcode ✓ \u2028"}`),
		call("unknown", "no_such_tool", `{}`),
		nsCall("not_loaded", ns, "fail", `{}`),
		call("invalid", "sleep", `{"ms":700000}`),
		call("missing_file", "read_file", `{"path":"no/such/file.txt"}`),
	)

	// Step 1: a client tool search loads the deferred MCP tools.
	expect["search"] = want{1, "ok"}
	_, done := run("items", 1, searchCall("search", "fail wait draw search notes"))
	if len(done.Items) != 1 {
		t.Fatalf("tool search step: %d items", len(done.Items))
	}
	if loaded := loadedTools(t, done.Items[0]); !loaded[ns+".fail"] || !loaded[ns+".wait"] {
		t.Fatalf("tool search did not load %s.fail and %s.wait: %s", ns, ns, done.Items[0])
	}

	// Step 2: the loaded tools, failing and timing out.
	expect["mcp_fail"] = want{2, "tool_error"}
	expect["mcp_timeout"] = want{2, "timeout"}
	expect["mcp_draw"] = want{2, "ok"}
	expect["mcp_search"] = want{2, "ok"}
	run("items", 2,
		nsCall("mcp_fail", ns, "fail", `{}`),
		nsCall("mcp_timeout", ns, "wait", `{"ms":600000}`),
		nsCall("mcp_draw", ns, "draw", `{}`),
		nsCall("mcp_search", ns, "search_notes", `{"query":"x","tags":["a"],"limit":2}`),
	)

	// A cancel while a call runs, then a step of the cancelled turn.
	expect["running"] = want{0, "aborted"}
	expect["after_cancel"] = want{1, "aborted"}
	activity := make(chan *nats.Msg, 16)
	sub, err := f.nc.ChanSubscribe(protocol.Subject(protocol.PrefixActive, "a1", "cancel"), activity)
	must(t, err)
	defer sub.Unsubscribe()
	r := f.publish(t, "a1", "cancel", 0, ctx, call("running", "sleep", `{"ms":600000}`))
	waitStarted(t, activity, "running")
	must(t, f.nc.Publish(protocol.Subject(protocol.PrefixCancel, "a1", "cancel"), []byte(`{"reason":"the user stopped it"}`)))
	outs, done := r.wait(t)
	items = append(items, done.Items...)
	events = append(events, outs["running"])
	if !done.EndTurn {
		t.Error("the cancelled step's step.done does not end the turn")
	}
	// A context without deferred tools: with them, such a step is never
	// answered (TestStepAfterCancelWithDeferredTools).
	ctx = map[string]any{"kind": "text", "bindings": map[string]bool{"diagnostics": true}}
	run("cancel", 1, call("after_cancel", "ping", `{}`))

	// gotest.draw's output is media, so one array output goes into the
	// request below among the others (TestMediaItemsRoundTrip reads its
	// parts).
	i := slices.IndexFunc(events, func(e event) bool { return e.CallID == "mcp_draw" })
	if i < 0 {
		t.Fatal("no call.output for mcp_draw")
	}
	var drawn struct {
		Output json.RawMessage `json:"output"`
	}
	must(t, json.Unmarshal(events[i].Item, &drawn))
	if !strings.HasPrefix(string(drawn.Output), "[") {
		t.Errorf("gotest.draw's output is not the array form: %.300s", drawn.Output)
	}

	seen := map[string]bool{}
	for _, e := range events {
		w, ok := expect[e.CallID]
		if !ok {
			t.Errorf("call.output for unknown call %q", e.CallID)
			continue
		}
		got := e.Status
		if e.Status == "error" && e.Error != nil {
			got = e.Error.Kind
		}
		if got != w.outcome || e.Step != w.step {
			t.Errorf("call %s: step %d %s, want step %d %s: %s", e.CallID, e.Step, got, w.step, w.outcome, e.Raw)
		}
		seen[got] = true
		checkItem(t, "call.output of "+e.CallID, e.Item)
	}
	for _, k := range []string{"ok", "unknown_tool", "not_loaded", "invalid_arguments", "tool_error", "timeout", "aborted"} {
		if !seen[k] {
			t.Errorf("no call ended %s", k)
		}
	}
	if len(items) != len(expect) {
		t.Errorf("%d step.done items, want %d", len(items), len(expect))
	}
	kinds := map[string]int{}
	for i, it := range items {
		kinds[checkItem(t, "step.done item "+strconv.Itoa(i), it)]++
	}
	t.Logf("%d step.done items round-tripped, by type: %v; outcomes: %v", len(items), kinds, slices.Sorted(maps.Keys(seen)))

	// The items go into the next request as they came.
	input := make(responses.ResponseInputParam, len(items))
	for i, it := range items {
		input[i] = param.Override[responses.ResponseInputItemUnionParam](it)
	}
	body := captureRequest(t, responses.ResponseNewParams{Model: "gpt-5",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	var sent []json.RawMessage
	must(t, json.Unmarshal(bodyField(t, body, "input"), &sent))
	if len(sent) != len(items) {
		t.Fatalf("the request has %d input items, want %d", len(sent), len(items))
	}
	for i := range items {
		if !bytes.Equal(sent[i], items[i]) {
			t.Errorf("input item %d is not the step.done bytes:\n sent %.300s\n want %.300s", i, sent[i], items[i])
		}
	}
}

// TestInterruptedItem makes the one more error kind a gateway can see
// without approvals: the worker dies while a tool that is not read-only
// runs, the step is delivered again to the next worker, which does not
// run the call twice and answers it interrupted. That item round-trips
// like the others.
func TestInterruptedItem(t *testing.T) {
	marks := t.TempDir()
	f := startFleet(t, "--mark-dir", marks, "--ack-wait", "2s")
	activity := make(chan *nats.Msg, 16)
	sub, err := f.nc.ChanSubscribe(protocol.Subject(protocol.PrefixActive, "a1", "crash"), activity)
	must(t, err)
	defer sub.Unsubscribe()
	diag := map[string]any{"kind": "text", "bindings": map[string]bool{"diagnostics": true}}
	r := f.publish(t, "a1", "crash", 0, diag, call("marking", "mark", `{"label":"once","ms":600000}`))
	waitStarted(t, activity, "marking")
	// "started" is published before the tool runs: kill only once the mark
	// is written, or the check below sees no run at all (it did, one run
	// in three).
	marksLog := filepath.Join(marks, "marks.log")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(marksLog); string(b) == "once\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the mark was not written within 30s of the call's start")
		}
	}
	f.kill(t)
	f.start(t)
	outs, done := r.wait(t)
	if o := outs["marking"]; o.Error == nil || o.Error.Kind != "interrupted" {
		t.Fatalf("the call cut short by the crash: %s", o.Raw)
	}
	checkItem(t, "call.output of marking", outs["marking"].Item)
	if len(done.Items) != 1 {
		t.Fatalf("step.done has %d items", len(done.Items))
	}
	checkItem(t, "step.done item", done.Items[0])
	b, err := os.ReadFile(marksLog)
	must(t, err)
	if string(b) != "once\n" {
		t.Errorf("marks.log %q: the call ran other than once", b)
	}
}

// checkItem round-trips one output item through the SDK's input item
// union and returns its type.
func checkItem(t *testing.T, what string, raw json.RawMessage) string {
	t.Helper()
	var head struct {
		Type   string          `json:"type"`
		CallID string          `json:"call_id"`
		Output json.RawMessage `json:"output"`
		Tools  []json.RawMessage
	}
	must(t, json.Unmarshal(raw, &head))
	u, diffs, err := roundTrip[responses.ResponseInputItemUnionParam](raw)
	if err != nil {
		t.Errorf("%s: the SDK cannot read %.200s: %v", what, raw, err)
		return head.Type
	}
	for _, d := range diffs {
		t.Errorf("%s (%s): the SDK's round trip changed %s", what, head.Type, d)
	}
	switch head.Type {
	case "function_call_output":
		o := u.OfFunctionCallOutput
		switch {
		case o == nil || o.CallID.Value != head.CallID:
			t.Errorf("%s: not read as a function_call_output of %s", what, head.CallID)
		case strings.HasPrefix(string(head.Output), `"`) && !o.Output.OfString.Valid():
			t.Errorf("%s: a string output not read as a string", what)
		case strings.HasPrefix(string(head.Output), `[`) && len(o.Output.OfResponseFunctionCallOutputItemArray) == 0:
			t.Errorf("%s: an array output not read as content", what)
		}
	case "tool_search_output":
		if o := u.OfToolSearchOutput; o == nil || o.CallID.Value != head.CallID || len(o.Tools) != len(head.Tools) {
			t.Errorf("%s: not read as a tool_search_output of %d tools", what, len(head.Tools))
		}
	default:
		t.Errorf("%s: type %q is not an output item of the protocol", what, head.Type)
	}
	return head.Type
}

// roundTrip unmarshals raw into the SDK type T, marshals it back and
// lists what changed.
func roundTrip[T any](raw []byte) (T, []string, error) {
	var u T
	if err := json.Unmarshal(raw, &u); err != nil {
		return u, nil, err
	}
	back, err := json.Marshal(u)
	if err != nil {
		return u, nil, err
	}
	diffs, err := jsonDiff(raw, back)
	return u, diffs, err
}

// waitStarted waits for the activity event that says the call started.
func waitStarted(t *testing.T, activity <-chan *nats.Msg, callID string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-activity:
			var a struct {
				CallID string `json:"call_id"`
				State  string `json:"state"`
			}
			if json.Unmarshal(m.Data, &a) == nil && a.CallID == callID && a.State == "started" {
				return
			}
		case <-timeout:
			t.Fatalf("call %s never started", callID)
		}
	}
}

// TestStepAfterCancelWithDeferredTools is the contract's "a later step of
// a cancelled turn is answered with aborted outputs without running
// anything" for a turn whose catalog has deferred tools. It holds
// turn.Runner.Dispatch to reading the turn's loaded tools with the
// step's context, not the one the cancel mark aborted: with that one the
// read fails, the step is delivered again until it is dead-lettered, and
// the gateway never gets its step.done.
func TestStepAfterCancelWithDeferredTools(t *testing.T) {
	f := startFleet(t)
	activity := make(chan *nats.Msg, 16)
	sub, err := f.nc.ChanSubscribe(protocol.Subject(protocol.PrefixActive, "a1", "gone"), activity)
	must(t, err)
	defer sub.Unsubscribe()
	r := f.publish(t, "a1", "gone", 0, allContext(), call("c0", "sleep", `{"ms":600000}`))
	waitStarted(t, activity, "c0")
	must(t, f.nc.Publish(protocol.Subject(protocol.PrefixCancel, "a1", "gone"), []byte(`{"reason":"stopped"}`)))
	r.wait(t)
	outs, done := f.publish(t, "a1", "gone", 1, allContext(), call("c1", "ping", `{}`)).wait(t)
	if o := outs["c1"]; o.Error == nil || o.Error.Kind != "aborted" || !done.EndTurn {
		t.Errorf("step 1 of the cancelled turn: %s; step.done %s", o.Raw, done.Raw)
	}
}
