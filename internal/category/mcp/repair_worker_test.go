package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/protocol"
)

// TestWorkerRepairs sends malformed arguments to MCP tools through a real
// worker over NATS, a read-only one (echo) and a destructive one
// (write_note), and checks each call.output: a lossless repair runs the
// exact value and names its rungs; a cut or an ambiguous text is refused
// with invalid_arguments, one sentence naming the byte, and the rungs
// that ran.
func TestWorkerRepairs(t *testing.T) {
	t.Parallel()
	hs := startHTTPServer(t)
	r := startRig(t, map[string]mcp.ServerConfig{"calc": hs.config()})
	ctx := protocol.Context{Kind: protocol.KindText, MCPServers: []string{"calc"}}

	c, err := r.js.OrderedConsumer(context.Background(), protocol.StreamOutputs,
		jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, "a1", "t1")}})
	if err != nil {
		t.Fatal(err)
	}
	type output struct {
		Type    string   `json:"type"`
		CallID  string   `json:"call_id"`
		Status  string   `json:"status"`
		Repairs []string `json:"repairs"`
		Error   *struct {
			Kind string `json:"kind"`
		} `json:"error"`
		Item json.RawMessage `json:"item"`
	}
	ch := make(chan output, 100)
	cc, err := c.Consume(func(m jetstream.Msg) {
		var o output
		_ = json.Unmarshal(m.Data(), &o)
		ch <- o
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	step := func() map[string]output {
		outs := map[string]output{}
		for {
			select {
			case o := <-ch:
				if o.Type == protocol.EventStepDone {
					return outs
				}
				outs[o.CallID] = o
			case <-time.After(60 * time.Second):
				t.Fatal("no step.done")
			}
		}
	}
	r.send("t1", 0, ctx, search("s1", "echo the text back"), search("s2", "write a note replacing the last one"))
	step()

	cases := []struct {
		tool, args string
		want       string   // the text the tool must get; "" for a refusal
		rungs      []string // repairs reported
		mention    []string // in a refusal's text
	}{
		{"echo", "```json\n{\"text\": \"a \\\"q\\\" \\\\ \\u00e9 \\ud83d\\ude00\",}\n```", "a \"q\" \\ é 😀", []string{"strip_fences", "trailing_commas"}, nil},
		{"echo", `{'text': '^\d{3}$'}`, `^\d{3}$`, []string{"single_quotes", "invalid_escapes"}, nil},
		{"echo", `"{\"text\": \"line\nnext\"}"`, "line\nnext", []string{"double_encoded", "control_chars"}, nil},
		{"echo", `{"text": "SELECT * FROM t WHE`, "", nil, []string{"cut off at byte 29", "/text"}},
		{"echo", `{"query": {"text": "x"}}, "text": "y"}`, "", nil, []string{"byte 24"}},
		{"write_note", `{{text: "rm -rf build/" // all of it` + "\n}}", "rm -rf build/", []string{"wrapping_braces", "comments", "unquoted_keys"}, nil},
		{"write_note", "{\"text\": \"ok\"}}\n<|call|>", "ok", []string{"strip_fences", "extra_closer"}, nil},
		{"write_note", `{'text': 'café` + "\xc3", "", []string{"single_quotes"}, []string{"cut off at byte"}},
		{"write_note", `{"text": "it\'s"}`, "", nil, []string{"two readings", "/text"}},
	}
	for i, tc := range cases {
		id := "c" + string(rune('a'+i))
		r.send("t1", i+1, ctx, call(id, "calc", tc.tool, tc.args))
		o := step()[id]
		var it protocol.FunctionCallOutput
		if err := json.Unmarshal(o.Item, &it); err != nil {
			t.Fatalf("%s: item %s: %v", id, o.Item, err)
		}
		if strings.Join(o.Repairs, ",") != strings.Join(tc.rungs, ",") {
			t.Errorf("%s %q: repairs %q, want %q", id, tc.args, o.Repairs, tc.rungs)
		}
		if tc.want != "" {
			if o.Status != "ok" || (tc.tool == "echo" && it.Output != tc.want) {
				t.Errorf("%s %q: %s %q, want %q", id, tc.args, o.Status, it.Output, tc.want)
			}
			if tc.tool == "write_note" {
				waitMark(t, hs.marks, "note "+tc.want)
			}
			continue
		}
		if o.Error == nil || o.Error.Kind != "invalid_arguments" {
			t.Errorf("%s %q: %s %s, want invalid_arguments", id, tc.args, o.Status, o.Item)
			continue
		}
		for _, m := range tc.mention {
			if !strings.Contains(it.Output, m) {
				t.Errorf("%s %q: %q does not mention %q", id, tc.args, it.Output, m)
			}
		}
		t.Logf("%s refusal: %s", id, it.Output)
	}
}
