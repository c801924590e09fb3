package openai_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentbull/toolruntime/protocol"
)

// wantTools are tools each category must contribute to the catalog of
// allContext, by name ("namespace.name" inside a namespace), so that a
// category that silently drops out fails here instead of shrinking what
// is checked.
var wantTools = map[string][]string{
	"todo":            {"todo_write", "todo_read"},
	"computer":        {"list_files", "read_file", "write_file", "edit_file", "run_command"},
	"web":             {"web_fetch", "web_search"},
	"brain":           {"recall", "get_page", "write_page", "delete_page", "list_pages"},
	"schedules":       {"create_schedule", "list_schedules", "delete_schedule"},
	"background_jobs": {"start_job", "show_job", "list_jobs", "cancel_job"},
	"workflows":       {"start_workflow", "show_workflow", "list_workflows", "cancel_workflow", "submit_result"},
	"diagnostics":     {"ping", "sleep", "finish"},
	"skills":          {"read_skill"},
	"mcp":             {mcpServer + ".echo", mcpServer + ".search_notes", mcpServer + ".wait", mcpServer + ".fail", mcpServer + ".draw", mcpServer + ".scan"},
	"tool search":     {"tool_search"},
}

// toolHead is what the tests read of a tool definition.
type toolHead struct {
	Type         string            `json:"type"`
	Name         string            `json:"name"`
	DeferLoading bool              `json:"defer_loading"`
	Tools        []json.RawMessage `json:"tools"`
}

// TestCatalogRoundTrip checks every tool definition of a main turn's full
// catalog and of a workflow task turn's catalog: each unmarshals into
// responses.ToolUnionParam as the variant its type names, and marshals
// back to JSON equal to the worker's. A field the SDK drops, adds or
// changes is listed by its JSON pointer.
func TestCatalogRoundTrip(t *testing.T) {
	f := startFleet(t)
	main := f.catalog(t, "a1", "t1", allContext())
	task := f.taskCatalog(t)

	names := map[string]bool{}
	var defs, deferred int
	for _, c := range []struct {
		name string
		r    catalogReply
	}{{"main turn", main}, {"task turn", task}} {
		var list []json.RawMessage
		must(t, json.Unmarshal(c.r.Tools, &list))
		for i, raw := range list {
			var h toolHead
			must(t, json.Unmarshal(raw, &h))
			var u responses.ToolUnionParam
			if err := json.Unmarshal(raw, &u); err != nil {
				t.Errorf("%s tool %d (%s %s): the SDK cannot read it: %v", c.name, i, h.Type, h.Name, err)
				continue
			}
			defs++
			switch h.Type {
			case "function":
				if u.OfFunction == nil || u.OfFunction.Name != h.Name {
					t.Errorf("%s tool %q: not read as a function tool: %+v", c.name, h.Name, u)
				}
				names[h.Name] = true
				if h.DeferLoading {
					deferred++
				}
			case "namespace":
				if u.OfNamespace == nil || u.OfNamespace.Name != h.Name || len(u.OfNamespace.Tools) != len(h.Tools) {
					t.Errorf("%s namespace %q: not read as a namespace of %d tools: %+v", c.name, h.Name, len(h.Tools), u)
					continue
				}
				for j, inner := range h.Tools {
					var ih toolHead
					must(t, json.Unmarshal(inner, &ih))
					if fn := u.OfNamespace.Tools[j].OfFunction; fn == nil || fn.Name != ih.Name {
						t.Errorf("%s namespace %q tool %d (%s): not read as a function", c.name, h.Name, j, ih.Name)
					}
					names[h.Name+"."+ih.Name] = true
					defs++
					if ih.DeferLoading {
						deferred++
					}
				}
			case "tool_search":
				if u.OfToolSearch == nil {
					t.Errorf("%s: tool_search not read as one: %+v", c.name, u)
				}
				if i != len(list)-1 {
					t.Errorf("%s: tool_search is entry %d of %d, not the last", c.name, i, len(list))
				}
				names["tool_search"] = true
			default:
				t.Errorf("%s tool %d: type %q is not one of the protocol's", c.name, i, h.Type)
			}
			back, err := json.Marshal(u)
			must(t, err)
			diffs, err := jsonDiff(raw, back)
			must(t, err)
			for _, d := range diffs {
				t.Errorf("%s tool %q: the SDK's round trip changed %s", c.name, h.Name, d)
			}
		}
	}
	for cat, want := range wantTools {
		for _, n := range want {
			if !names[n] {
				t.Errorf("category %s: tool %s is not in the catalog", cat, n)
			}
		}
	}
	if deferred == 0 {
		t.Error("no deferred tool in the catalog")
	}
	t.Logf("%d tool definitions (%d deferred) round-tripped; names: %v", defs, deferred, slices.Sorted(maps.Keys(names)))
}

// TestCatalogDigestThroughSDK passes the catalog's definitions to
// Responses.New as param.Override raw bytes and captures the request
// the SDK sends: its "tools" are the catalog's bytes exactly, so their
// sha256 is the reply's digest. Re-marshalling the SDK's own types
// instead does not keep them (logged, for the reason Override is needed).
func TestCatalogDigestThroughSDK(t *testing.T) {
	f := startFleet(t)
	for _, c := range []struct {
		name string
		r    catalogReply
	}{{"main turn", f.catalog(t, "a1", "t1", allContext())}, {"task turn", f.taskCatalog(t)}} {
		sum := sha256.Sum256(c.r.Tools)
		if hex.EncodeToString(sum[:]) != c.r.Digest {
			t.Fatalf("%s: digest %s is not the sha256 of the tools as sent (%x)", c.name, c.r.Digest, sum)
		}
		var list []json.RawMessage
		must(t, json.Unmarshal(c.r.Tools, &list))
		passed := make([]responses.ToolUnionParam, len(list))
		typed := make([]responses.ToolUnionParam, len(list))
		for i, raw := range list {
			passed[i] = param.Override[responses.ToolUnionParam](raw)
			must(t, json.Unmarshal(raw, &typed[i]))
		}

		body := captureRequest(t, responses.ResponseNewParams{Model: "gpt-5", Tools: passed,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
		sent := bodyField(t, body, "tools")
		if !bytes.Equal(sent, c.r.Tools) {
			t.Errorf("%s: the request's tools are not the catalog's bytes:\n sent %.300s\n want %.300s", c.name, sent, c.r.Tools)
		}
		got := sha256.Sum256(sent)
		if hex.EncodeToString(got[:]) != c.r.Digest {
			t.Errorf("%s: the request's tools hash to %x, not the digest %s", c.name, got, c.r.Digest)
		}

		body = captureRequest(t, responses.ResponseNewParams{Model: "gpt-5", Tools: typed,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
		changed := 0
		var retyped []json.RawMessage
		must(t, json.Unmarshal(bodyField(t, body, "tools"), &retyped))
		for i := range list {
			if !bytes.Equal(retyped[i], list[i]) {
				changed++
			}
		}
		t.Logf("%s: %d of %d definitions change bytes (not value) when the SDK re-marshals its own types", c.name, changed, len(list))
	}
}

// captureRequest sends params with the SDK to an httptest server standing
// in for the Responses API and returns the request body as sent.
func captureRequest(t *testing.T, params responses.ResponseNewParams) []byte {
	t.Helper()
	var (
		mu   sync.Mutex
		body []byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		body = b
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"resp_1","object":"response","created_at":0,"status":"completed","model":"gpt-5","output":[]}`))
	}))
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.Responses.New(ctx, params); err != nil {
		t.Fatalf("Responses.New: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if body == nil {
		t.Fatal("the SDK sent no request body")
	}
	return body
}

// bodyField returns a top-level field of a request body, its bytes as sent.
func bodyField(t *testing.T, body []byte, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("request body %.200s: %v", body, err)
	}
	v, ok := m[name]
	if !ok {
		t.Fatalf("request body has no %q: %.300s", name, body)
	}
	return v
}

// taskCatalog starts a workflow of one task from a main turn, as a model
// would with start_workflow, and returns the catalog of that task's turn
// (web and brain bound): its read-only tools and submit_result, whose
// parameters hold the task's result schema.
func (f *fleet) taskCatalog(t *testing.T) catalogReply {
	t.Helper()
	bg := context.Background()
	// From the start of the stream: an ordered consumer is made on its
	// first fetch, after the step, and this fleet has no other workflow.
	events, err := f.js.OrderedConsumer(bg, protocol.StreamWorkflows, jetstream.OrderedConsumerConfig{})
	must(t, err)
	schema := `{"type":"object","properties":{"title":{"type":"string","description":"A <short> title & more"},` +
		`"score":{"type":"number","minimum":0,"maximum":1},"tags":{"type":"array","items":{"type":"string","enum":["a","b"]}},` +
		`"author":{"type":["string","null"]}},"required":["title","score","tags","author"],"additionalProperties":false}`
	args, _ := json.Marshal(map[string]any{"title": "compat", "tasks": []any{map[string]any{
		"id": "t1", "instructions": "Rate the page.", "result_schema": json.RawMessage(schema)}}})
	outs, _ := f.publish(t, "a1", "wf", 0, allContext(), call("c1", "start_workflow", string(args))).wait(t)
	if o := outs["c1"]; o.Status != "ok" {
		t.Fatalf("start_workflow: %s", o.Raw)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		m, err := events.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			continue
		}
		var ev struct {
			Type       string `json:"type"`
			AgentID    string `json:"agent_id"`
			TurnID     string `json:"turn_id"`
			WorkflowID string `json:"workflow_id"`
			TaskID     string `json:"task_id"`
		}
		must(t, json.Unmarshal(m.Data(), &ev))
		if ev.Type != "task.ready" {
			continue
		}
		return f.catalog(t, ev.AgentID, ev.TurnID, map[string]any{
			"kind": "workflow_task", "bindings": map[string]bool{"web": true, "brain": true},
			"workflow_id": ev.WorkflowID, "task_id": ev.TaskID,
		})
	}
	t.Fatal("no task.ready within 30s of start_workflow")
	return catalogReply{}
}
