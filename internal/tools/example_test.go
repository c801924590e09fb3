package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentbull/toolruntime/internal/tools"
)

// GreetParams are the parameters of the greet tool: the schema the model
// sees is inferred from the fields and their tags, once.
type GreetParams struct {
	Name  string `json:"name" jsonschema:"description=Who to greet."`
	Times int    `json:"times,omitempty" jsonschema:"description=How many times.,minimum=1,maximum=3"`
}

// A typed tool: Execute receives validated, decoded parameters and never
// touches raw JSON.
func ExampleNew() {
	greet, err := tools.New(tools.Def[GreetParams]{
		Spec:     tools.Spec{Name: "greet", Description: "Greet someone.", ReadOnly: true},
		Activity: func(p GreetParams) string { return "Greeting " + p.Name },
		Execute: func(_ context.Context, p GreetParams) (tools.Result, error) {
			return tools.Result{Content: strings.TrimSpace(strings.Repeat("Hello, "+p.Name+"! ", max(p.Times, 1)))}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(greet.Definition()))
	fmt.Println(greet.Spec().ExecutionMode)

	// The model's argument string: validated, repaired where safe, decoded.
	inv, err := tools.Prepare(greet, `{"name": "Ada", "times": 2}`, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(inv.Activity)
	res, err := inv.Run(context.Background())
	fmt.Println(res.Content, err)

	// Arguments that break the schema never reach Execute: the model gets
	// every violation and the expected schema.
	_, err = tools.Prepare(greet, `{"name": "Ada", "times": 7}`, 0)
	var te *tools.Error
	if errors.As(err, &te) {
		fmt.Println(te.Kind)
		fmt.Println(strings.Split(te.Message, "\n")[2])
	}
	// Output:
	// {"type":"function","name":"greet","description":"Greet someone.","parameters":{"properties":{"name":{"type":"string","description":"Who to greet."},"times":{"type":["integer","null"],"maximum":3,"minimum":1,"description":"How many times."}},"additionalProperties":false,"type":"object","required":["name","times"]},"strict":true}
	// parallel
	// Greeting Ada
	// Hello, Ada! Hello, Ada! <nil>
	// invalid_arguments
	// - /times: must be <= 3 but found 7
}

// LookupParams are decoded from arguments checked against a raw schema.
type LookupParams struct {
	Key    string `json:"key"`
	Shards []int  `json:"shards"`
}

// A tool with a raw schema: every keyword is sent and enforced as written,
// and the arguments are decoded into the tool's type after validation.
func ExampleNew_rawSchema() {
	lookup := tools.Must(tools.Def[LookupParams]{
		Spec: tools.Spec{
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
		Execute: func(_ context.Context, p LookupParams) (tools.Result, error) {
			return tools.Result{Content: fmt.Sprintf("%s in shards %v", p.Key, p.Shards)}, nil
		},
	})
	fmt.Println(string(lookup.Schema()))

	// A fenced, valid call is repaired and runs.
	inv, err := tools.Prepare(lookup, "```json\n{\"key\": \"user:42\", \"shards\": [1, 3]}\n```", 0)
	if err != nil {
		panic(err)
	}
	res, _ := inv.Run(context.Background())
	fmt.Println(res.Content, inv.Repairs)

	// Every violation is listed with its JSON pointer.
	_, err = tools.Prepare(lookup, `{"key": "user", "shards": [1, 9]}`, 0)
	for _, line := range strings.Split(err.(*tools.Error).Message, "\n") {
		if strings.HasPrefix(line, "- ") {
			fmt.Println(line)
		}
	}
	// Output:
	// {"type":"object","properties":{"key":{"type":"string","pattern":"^[a-z]+:[0-9]+$"},"shards":{"type":"array","items":{"type":"integer","minimum":0,"maximum":7},"uniqueItems":true}},"required":["key","shards"]}
	// user:42 in shards [1 3] [strip_fences]
	// - /key: does not match pattern '^[a-z]+:[0-9]+$'
	// - /shards/1: must be <= 7 but found 9
}

// A tool that panics or fails gives the model a tool_error output instead of
// taking the worker down.
func ExampleInvocation_Run() {
	flaky := tools.Must(tools.Def[struct{}]{
		Spec: tools.Spec{Name: "flaky", Description: "Fails."},
		Execute: func(context.Context, struct{}) (tools.Result, error) {
			var m map[string]int
			m["x"]++ // nil map write: a panic
			return tools.Result{}, nil
		},
	})
	inv, _ := tools.Prepare(flaky, ``, 0)
	_, err := inv.Run(context.Background())
	fmt.Println(err)
	// Output:
	// tool_error: the tool failed unexpectedly: assignment to entry in nil map
}
