package mcpdoor_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/mcpdoor"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rpcAnswer is a JSON-RPC answer: its result or its error.
type rpcAnswer struct {
	Status int
	Result map[string]any
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
}

var rpcID atomic.Int64

// rpc26 sends one 2026-07-28 request as a stateless client does: the
// version, the client's capabilities (with the tasks extension when
// tasks) in _meta, and the Mcp-Method and Mcp-Name headers.
func rpc26(t *testing.T, url, token, method string, params map[string]any, tasks bool) rpcAnswer {
	t.Helper()
	return rpc26h(t, url, token, method, params, tasks, nil)
}

// rpc26h is rpc26 with headers set over its own.
func rpc26h(t *testing.T, url, token, method string, params map[string]any, tasks bool, hdr map[string]string) rpcAnswer {
	t.Helper()
	caps := map[string]any{"elicitation": map[string]any{}}
	if tasks {
		caps["extensions"] = map[string]any{mcpdoor.ExtTasks: map[string]any{}}
	}
	if params == nil {
		params = map[string]any{}
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
	meta["io.modelcontextprotocol/clientCapabilities"] = caps
	params["_meta"] = meta
	id := rpcID.Add(1)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req := mcpPost(url+mcpdoor.Path, token, "2026-07-28", string(body))
	req.Header.Set("Mcp-Method", method)
	if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	if n, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := rpcAnswer{Status: resp.StatusCode}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Result map[string]any  `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	decode := func(b []byte) bool {
		msg.ID, msg.Result, msg.Error = nil, nil, nil
		if json.Unmarshal(b, &msg) != nil || string(msg.ID) != fmt.Sprint(id) && string(msg.ID) != "null" {
			return false
		}
		return msg.Result != nil || msg.Error != nil
	}
	found := false
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok && decode([]byte(strings.TrimSpace(d))) {
				found = true
				break
			}
		}
	} else {
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		found = decode([]byte(b.String()))
	}
	if !found {
		t.Fatalf("%s: no answer (HTTP %d)", method, resp.StatusCode)
	}
	a.Result = msg.Result
	if msg.Error != nil {
		_ = json.Unmarshal(msg.Error, &a.Error)
	}
	return a
}

// call26 is a tools/call by rpc26.
func call26(t *testing.T, url, token, name string, args map[string]any, tasks bool) rpcAnswer {
	t.Helper()
	return rpc26(t, url, token, "tools/call", map[string]any{"name": name, "arguments": args}, tasks)
}

const taskPrincipals = `{"principals":[
	{"name":"alice","token_sha256":[%q],"agent_id":"agent-alice","approval":["fail"]},
	{"name":"bob","token_sha256":[%q],"agent_id":"agent-bob"}]}`

// taskDoors is a fleet behind two door replicas on one seal key, and a
// proxy alternating requests between them.
func taskDoors(t *testing.T, cfg mcpdoor.Config) (string, *probes) {
	t.Helper()
	s, pr := fleet(t)
	cfg.Principals = principals(t, fmt.Sprintf(taskPrincipals, hash("alice-secret-token"), hash("bob-secret-token")))
	cfg.SealKey = sealKey
	a := serveDoor(t, s, cfg)
	b := serveDoor(t, s, cfg)
	return alternate(t, a, b).URL, pr
}

// pollTask asks tasks/get until the status is one of want.
func pollTask(t *testing.T, url, token, id string, want ...string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last map[string]any
	for time.Now().Before(deadline) {
		a := rpc26(t, url, token, "tasks/get", map[string]any{"taskId": id}, true)
		if a.Error != nil {
			t.Fatalf("tasks/get: %+v", a.Error)
		}
		last = a.Result
		for _, w := range want {
			if a.Result["status"] == w {
				return a.Result
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("task %s never reached %v; last %v", id, want, last)
	return nil
}

// TestTaskRoundTrip: a declaring client's long call becomes a task whose
// tasks/get answers on either replica: working, then completed with the
// call's result. A short call stays a plain result; a client without
// the extension waits for the output and gets -32021 from tasks/*.
func TestTaskRoundTrip(t *testing.T) {
	url, pr := taskDoors(t, mcpdoor.Config{TaskAfter: 300 * time.Millisecond})
	const alice = "alice-secret-token"

	a := call26(t, url, alice, "echo", map[string]any{"text": "hi"}, true)
	if a.Error != nil || a.Result["resultType"] != "complete" || a.Result["taskId"] != nil {
		t.Fatalf("short call: %+v %v", a.Error, a.Result)
	}

	a = call26(t, url, alice, "wait", map[string]any{"steps": 6}, true)
	if a.Error != nil || a.Result["resultType"] != "task" || a.Result["status"] != "working" {
		t.Fatalf("long call: %+v %v", a.Error, a.Result)
	}
	id, _ := a.Result["taskId"].(string)
	for _, k := range []string{"createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} {
		if a.Result[k] == nil {
			t.Errorf("CreateTaskResult without %s: %v", k, a.Result)
		}
	}
	if _, ok := a.Result["content"]; ok {
		t.Errorf("CreateTaskResult with content: %v", a.Result)
	}
	// Right away, on the other replica: the task is known.
	g := rpc26(t, url, alice, "tasks/get", map[string]any{"taskId": id}, true)
	if g.Error != nil || g.Result["taskId"] != id || g.Result["resultType"] != "complete" {
		t.Fatalf("tasks/get at once: %+v %v", g.Error, g.Result)
	}
	done := pollTask(t, url, alice, id, "completed", "failed", "cancelled")
	res, _ := done["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if done["status"] != "completed" || len(content) != 1 || content[0].(map[string]any)["text"] != "done" {
		t.Fatalf("completed task: %v", done)
	}
	if pr.started.Load() != 1 {
		t.Fatalf("%d runs of wait", pr.started.Load())
	}

	// Without the extension: the same call answers with its output, and
	// tasks/* are refused with -32021 naming the extension.
	a = call26(t, url, alice, "wait", map[string]any{"steps": 2}, false)
	if a.Error != nil || a.Result["taskId"] != nil || a.Result["isError"] == true {
		t.Fatalf("call without the extension: %+v %v", a.Error, a.Result)
	}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		g = rpc26(t, url, alice, m, map[string]any{"taskId": id}, false)
		if g.Error == nil || g.Error.Code != -32021 || !strings.Contains(string(g.Error.Data), mcpdoor.ExtTasks) {
			t.Errorf("%s without the extension: %+v", m, g.Error)
		}
	}
	// tasks/result and tasks/list are not methods of the extension.
	for _, m := range []string{"tasks/result", "tasks/list"} {
		if g = rpc26(t, url, alice, m, map[string]any{"taskId": id}, true); g.Error == nil || g.Error.Code != -32601 {
			t.Errorf("%s: %+v", m, g.Error)
		}
	}
}

// TestTaskHostileIDs: another principal's task id, a forged one, one cut
// short, a session id or requestState in its place, and an expired one are
// all "not found" (-32602), and cancel none of the calls.
func TestTaskHostileIDs(t *testing.T) {
	url, pr := taskDoors(t, mcpdoor.Config{TaskAfter: 100 * time.Millisecond, TaskTTL: 3 * time.Second})
	const alice, bob = "alice-secret-token", "bob-secret-token"
	a := call26(t, url, alice, "wait", map[string]any{"steps": 3, "hold": true}, true)
	id, _ := a.Result["taskId"].(string)
	if id == "" {
		t.Fatalf("no task: %+v %v", a.Error, a.Result)
	}
	forged := []byte(id)
	forged[len(forged)/2] ^= 1
	for name, bad := range map[string]string{"bob's view of alice's": id, "forged": string(forged), "cut": id[:len(id)-4],
		"empty": "", "long": strings.Repeat("A", 5000)} {
		tok := alice
		if name == "bob's view of alice's" {
			tok = bob
		}
		for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
			g := rpc26(t, url, tok, m, map[string]any{"taskId": bad, "inputResponses": map[string]any{"approval": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}}, true)
			if g.Error == nil || g.Error.Code != -32602 {
				t.Errorf("%s id, %s: %+v %v", name, m, g.Error, g.Result)
			}
		}
	}
	if n := pr.cancelled.Load(); n != 0 {
		t.Fatalf("a hostile id cancelled %d calls", n)
	}
	g := rpc26(t, url, alice, "tasks/get", map[string]any{"taskId": id}, true)
	if g.Error != nil || g.Result["status"] != "working" {
		t.Fatalf("the real id: %+v %v", g.Error, g.Result)
	}
	// Mcp-Name must name the task of the body.
	g = rpc26h(t, url, alice, "tasks/get", map[string]any{"taskId": id}, true, map[string]string{"Mcp-Name": "another-task"})
	if g.Error == nil || g.Error.Code != -32020 || g.Status != http.StatusBadRequest {
		t.Fatalf("Mcp-Name of another task: %d %+v", g.Status, g.Error)
	}
	if rpc26(t, url, alice, "tasks/cancel", map[string]any{"taskId": id}, true).Error != nil {
		t.Fatal("cancel")
	}
	eventually(t, "the held call is cancelled", func() bool { return pr.cancelled.Load() == 1 })
	time.Sleep(3 * time.Second)
	if g = rpc26(t, url, alice, "tasks/get", map[string]any{"taskId": id}, true); g.Error == nil || g.Error.Code != -32602 {
		t.Fatalf("expired id: %+v %v", g.Error, g.Result)
	}
}

// TestTaskCancel: tasks/cancel on either replica ends the call on the
// workers and the task settles to cancelled; again on the ended task it
// is acked alike. In a named turn it cancels the task's step alone.
func TestTaskCancel(t *testing.T) {
	t.Parallel()
	url, pr := taskDoors(t, mcpdoor.Config{TaskAfter: 100 * time.Millisecond})
	const alice = "alice-secret-token"
	for i, meta := range []map[string]any{nil, {mcpdoor.MetaTurn: "named-turn"}} {
		params := map[string]any{"name": "wait", "arguments": map[string]any{"steps": 1, "hold": true}}
		if meta != nil {
			params["_meta"] = meta
		}
		a := rpc26(t, url, alice, "tools/call", params, true)
		id, _ := a.Result["taskId"].(string)
		if id == "" {
			t.Fatalf("no task: %+v %v", a.Error, a.Result)
		}
		eventually(t, "the call runs", func() bool { return pr.started.Load() == int64(i+1) })
		for range 2 {
			c := rpc26(t, url, alice, "tasks/cancel", map[string]any{"taskId": id}, true)
			if c.Error != nil || c.Result["resultType"] != "complete" || c.Result["status"] != nil || c.Result["taskId"] != nil {
				t.Fatalf("cancel ack: %+v %v", c.Error, c.Result)
			}
		}
		if st := pollTask(t, url, alice, id, "cancelled", "completed", "failed"); st["status"] != "cancelled" || st["result"] != nil {
			t.Fatalf("cancelled task: %v", st)
		}
		eventually(t, "the worker saw the cancel", func() bool { return pr.cancelled.Load() == int64(i+1) })
	}
	// The named turn goes on: its next call runs.
	a := rpc26(t, url, alice, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "after"},
		"_meta": map[string]any{mcpdoor.MetaTurn: "named-turn"}}, true)
	if a.Error != nil || a.Result["isError"] == true {
		t.Fatalf("the named turn's next call: %+v %v", a.Error, a.Result)
	}
}

// TestTaskApproval: a call held for approval becomes a task at once,
// input_required with the approval form; tasks/update on the other
// replica answers it and the task completes with the call's output (a
// refusal completes it with isError).
func TestTaskApproval(t *testing.T) {
	t.Parallel()
	url, _ := taskDoors(t, mcpdoor.Config{TaskAfter: 10 * time.Second})
	const alice = "alice-secret-token"
	for _, approve := range []bool{true, false} {
		a := call26(t, url, alice, "fail", map[string]any{"text": "boom"}, true)
		id, _ := a.Result["taskId"].(string)
		if id == "" || a.Result["status"] != "input_required" || a.Result["inputRequests"] != nil {
			t.Fatalf("held call: %+v %v", a.Error, a.Result)
		}
		g := pollTask(t, url, alice, id, "input_required")
		reqs, _ := g["inputRequests"].(map[string]any)
		form, _ := reqs["approval"].(map[string]any)
		if form["method"] != "elicitation/create" {
			t.Fatalf("input requests: %v", g)
		}
		u := rpc26(t, url, alice, "tasks/update", map[string]any{"taskId": id,
			"inputResponses": map[string]any{"approval": map[string]any{"action": "accept", "content": map[string]any{"approve": approve}}}}, true)
		if u.Error != nil || u.Result["resultType"] != "complete" {
			t.Fatalf("update: %+v %v", u.Error, u.Result)
		}
		done := pollTask(t, url, alice, id, "completed", "failed", "cancelled")
		res, _ := done["result"].(map[string]any)
		b, _ := json.Marshal(res)
		// fail always fails: approved, it ran and says so; refused, it
		// did not run.
		if done["status"] != "completed" || res["isError"] != true || strings.Contains(string(b), "failed: boom") != approve {
			t.Fatalf("approve=%v: %v", approve, done)
		}
	}
}

// TestTaskRequired: a tool of TaskRequired is a task at once for a
// declaring client, and refused with -32021 to another.
func TestTaskRequired(t *testing.T) {
	t.Parallel()
	url, pr := taskDoors(t, mcpdoor.Config{TaskAfter: time.Minute, TaskRequired: []string{"echo"}})
	const bob = "bob-secret-token"
	a := call26(t, url, bob, "echo", map[string]any{"text": "x"}, false)
	if a.Error == nil || a.Error.Code != -32021 || a.Status != http.StatusBadRequest {
		t.Fatalf("without the extension: %d %+v %v", a.Status, a.Error, a.Result)
	}
	a = call26(t, url, bob, "echo", map[string]any{"text": "x"}, true)
	id, _ := a.Result["taskId"].(string)
	if id == "" {
		t.Fatalf("with the extension: %+v %v", a.Error, a.Result)
	}
	if st := pollTask(t, url, bob, id, "completed"); st["result"] == nil {
		t.Fatal(st)
	}
	_ = pr
}

// TestTaskGetFlood: one principal's flood of tasks/get is bounded per
// replica (-32000 past it), every request is answered, and another
// principal's calls go on.
func TestTaskGetFlood(t *testing.T) {
	t.Parallel()
	url, _ := taskDoors(t, mcpdoor.Config{TaskAfter: 100 * time.Millisecond, MaxInFlight: 4})
	const alice, bob = "alice-secret-token", "bob-secret-token"
	a := call26(t, url, alice, "wait", map[string]any{"steps": 1, "hold": true}, true)
	id, _ := a.Result["taskId"].(string)
	if id == "" {
		t.Fatalf("no task: %+v %v", a.Error, a.Result)
	}
	var ok, refused, other atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				g := rpc26(t, url, alice, "tasks/get", map[string]any{"taskId": id}, true)
				switch {
				case g.Error == nil && g.Result["status"] == "working":
					ok.Add(1)
				case g.Error != nil && g.Error.Code == -32000:
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		}()
	}
	b := call26(t, url, bob, "echo", map[string]any{"text": "still here"}, false)
	wg.Wait()
	if b.Error != nil || b.Result["isError"] == true {
		t.Fatalf("bob during the flood: %+v %v", b.Error, b.Result)
	}
	if other.Load() != 0 || ok.Load() == 0 {
		t.Fatalf("flood: %d ok, %d refused, %d other", ok.Load(), refused.Load(), other.Load())
	}
	t.Logf("flood of 200 tasks/get: %d answered, %d refused past the bound", ok.Load(), refused.Load())
	_ = rpc26(t, url, alice, "tasks/cancel", map[string]any{"taskId": id}, true)
}

// sdkTaskParams and sdkTask are the tasks/* params and answers as the Go
// SDK's client sends and reads them (CallCustomMethod).
type sdkTaskParams struct {
	mcp.ParamsBase
	TaskID         string         `json:"taskId"`
	InputResponses map[string]any `json:"inputResponses,omitempty"`
}

type sdkTask struct {
	mcp.ResultBase
	ResultType    string                     `json:"resultType"`
	TaskID        string                     `json:"taskId"`
	Status        string                     `json:"status"`
	Result        *mcp.CallToolResult        `json:"result"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
}

// TestTaskGoSDKClient: the official Go SDK's client, declaring the
// extension in its capabilities (sent in every request's _meta), polls,
// answers and cancels tasks with tasks/* as custom methods through two
// replicas alternated per request. The SDK's CallTool has no
// CreateTaskResult, so the call that makes the task is a raw request.
func TestTaskGoSDKClient(t *testing.T) {
	t.Parallel()
	url, pr := taskDoors(t, mcpdoor.Config{TaskAfter: 200 * time.Millisecond})
	const alice = "alice-secret-token"
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension(mcpdoor.ExtTasks, nil)
	c := mcp.NewClient(&mcp.Implementation{Name: "door-test", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		if err := mcp.AddSendingCustomMethod[*sdkTaskParams, *sdkTask](c, m); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url + mcpdoor.Path, HTTPClient: &http.Client{Transport: bearer{alice}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	get := func(id string) *sdkTask {
		t.Helper()
		r, err := mcp.CallCustomMethod[*sdkTaskParams, *sdkTask](ctx, cs, "tasks/get", &sdkTaskParams{TaskID: id})
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		return r
	}
	until := func(id string, want string) *sdkTask {
		t.Helper()
		for ctx.Err() == nil {
			if r := get(id); r.Status == want || r.Status == "completed" || r.Status == "failed" || r.Status == "cancelled" {
				return r
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("task never %s", want)
		return nil
	}

	// A long call, polled to its result.
	id, _ := call26(t, url, alice, "wait", map[string]any{"steps": 4}, true).Result["taskId"].(string)
	if id == "" {
		t.Fatal("no task")
	}
	if r := until(id, "completed"); r.Status != "completed" || r.Result == nil || text(t, r.Result) != "done" {
		t.Fatalf("completed: %+v", r)
	}

	// A held call, answered with tasks/update.
	id, _ = call26(t, url, alice, "fail", map[string]any{"text": "sdk"}, true).Result["taskId"].(string)
	if r := until(id, "input_required"); r.Status != "input_required" || r.InputRequests["approval"] == nil {
		t.Fatalf("held: %+v", r)
	}
	if _, err := mcp.CallCustomMethod[*sdkTaskParams, *sdkTask](ctx, cs, "tasks/update", &sdkTaskParams{TaskID: id,
		InputResponses: map[string]any{"approval": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}}); err != nil {
		t.Fatalf("tasks/update: %v", err)
	}
	if r := until(id, "completed"); r.Status != "completed" || r.Result == nil || !strings.Contains(text(t, r.Result), "failed: sdk") {
		t.Fatalf("approved: %+v", r)
	}

	// A call cancelled with tasks/cancel.
	before := pr.cancelled.Load()
	id, _ = call26(t, url, alice, "wait", map[string]any{"steps": 1, "hold": true}, true).Result["taskId"].(string)
	if _, err := mcp.CallCustomMethod[*sdkTaskParams, *sdkTask](ctx, cs, "tasks/cancel", &sdkTaskParams{TaskID: id}); err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	if r := until(id, "cancelled"); r.Status != "cancelled" {
		t.Fatalf("cancelled: %+v", r)
	}
	eventually(t, "the worker saw the cancel", func() bool { return pr.cancelled.Load() == before+1 })
}
