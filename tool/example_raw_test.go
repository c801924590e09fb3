package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentbull/toolruntime/tool"
	"github.com/agentbull/toolruntime/tool/tooltest"
)

// LookupParams are decoded from arguments checked against a raw schema.
type LookupParams struct {
	Key    string `json:"key"`
	Shards []int  `json:"shards"`
}

// A tool with a raw schema: every keyword is sent and enforced as written,
// and the arguments are decoded into the tool's type after validation.
// Package tooltest runs a call as the worker would.
func ExampleNew_rawSchema() {
	lookup := tool.Must(tool.Def[LookupParams]{
		Spec: tool.Spec{
			Name:        "lookup",
			Description: "Look a key up in some shards.",
			ReadOnly:    true,
			JSONSchema: json.RawMessage(`{
				"type": "object",
				"properties": {
					"key":    {"type": "string", "pattern": "^[a-z]+:[0-9]+$"},
					"shards": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 7}, "uniqueItems": true}
				},
				"required": ["key", "shards"]
			}`),
		},
		Execute: func(_ context.Context, p LookupParams) (tool.Result, error) {
			return tool.Result{Content: fmt.Sprintf("%s in shards %v", p.Key, p.Shards)}, nil
		},
	})
	fmt.Println(string(lookup.Schema()))

	// A fenced, valid call is repaired and runs.
	ctx := context.Background()
	out := tooltest.Check(ctx, lookup, "```json\n{\"key\": \"user:42\", \"shards\": [1, 3]}\n```")
	fmt.Println(out.Output, out.Repairs)

	// Every violation is refused, with its JSON pointer.
	out = tooltest.Check(ctx, lookup, `{"key": "user", "shards": [1, 9]}`)
	for _, line := range strings.Split(out.Output, "\n") {
		if strings.HasPrefix(line, "- /") {
			fmt.Println(line)
		}
	}
	// Output:
	// {"type":"object","properties":{"key":{"type":"string","pattern":"^[a-z]+:[0-9]+$"},"shards":{"type":"array","items":{"type":"integer","minimum":0,"maximum":7},"uniqueItems":true}},"required":["key","shards"]}
	// user:42 in shards [1 3] [strip_fences]
	// - /key: does not match pattern '^[a-z]+:[0-9]+$'
	// - /shards/1: must be <= 7 but found 9
}
