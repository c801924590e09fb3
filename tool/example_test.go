package tool_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentbull/toolruntime/tool"
)

// WeatherParams are the weather tool's parameters: the schema the model
// sees is inferred from them.
type WeatherParams struct {
	City string `json:"city" jsonschema:"description=The city to report on."`
	Unit string `json:"unit,omitempty" jsonschema:"enum=celsius,enum=fahrenheit"`
}

var weather = tool.Must(tool.Def[WeatherParams]{
	Spec:     tool.Spec{Name: "weather", Description: "Report today's weather in a city.", ReadOnly: true},
	Activity: func(p WeatherParams) string { return "Looking up the weather in " + p.City },
	Execute: func(ctx context.Context, p WeatherParams) (tool.Result, error) {
		if strings.TrimSpace(p.City) == "" {
			return tool.Result{}, tool.Errorf(tool.InvalidArguments, "city is empty; give a city's name")
		}
		return tool.Result{Content: "Sunny, 21 degrees in " + p.City}, nil
	},
})

func ExampleMust() {
	fmt.Println(weather.Name(), weather.Spec().ExecutionMode)
	fmt.Println(string(weather.Definition()))
	// Output:
	// weather parallel
	// {"type":"function","name":"weather","description":"Report today's weather in a city.","parameters":{"properties":{"city":{"type":"string","description":"The city to report on."},"unit":{"type":["string","null"],"enum":["celsius","fahrenheit",null]}},"additionalProperties":false,"type":"object","required":["city","unit"]},"strict":true}
}

func ExampleCheck() {
	ctx := context.Background()
	// The model's arguments as it sent them: a trailing comma is repaired.
	out := tool.Check(ctx, weather, `{"city": "Lisbon",}`)
	fmt.Println(out.Output, out.Repairs)
	// An argument the schema refuses: the model reads why, and the schema.
	out = tool.Check(ctx, weather, `{"city": "Lisbon", "unit": "kelvin"}`)
	fmt.Println(out.Err.Kind)
	// The tool's own refusal.
	out = tool.Check(ctx, weather, `{"city": " "}`)
	fmt.Println(out.Output)
	// Output:
	// Sunny, 21 degrees in Lisbon [trailing_commas]
	// invalid_arguments
	// Error (invalid_arguments): city is empty; give a city's name
}

func ExampleNewCategory() {
	// Offered to the turns whose context binds "weather".
	c := tool.NewCategory("weather", weather)
	ts, _ := c.Tools(context.Background(), tool.Turn{AgentID: "a1", TurnID: "t1", Bindings: map[string]bool{"weather": true}})
	fmt.Println(len(ts), ts[0].Name())
	ts, _ = c.Tools(context.Background(), tool.Turn{AgentID: "a1", TurnID: "t2"})
	fmt.Println(len(ts))
	// Output:
	// 1 weather
	// 0
}

// A category that reads the turn: the tools depend on the agent.
func ExampleCategory() {
	admin := tool.Must(tool.Def[struct{}]{
		Spec: tool.Spec{Name: "restart_service", Description: "Restart the service.", Destructive: true},
		Execute: func(ctx context.Context, _ struct{}) (tool.Result, error) {
			call, _ := tool.CallFrom(ctx)
			return tool.Result{Content: "restarted for " + call.AgentID}, nil
		},
	})
	c := tool.Category{Name: "ops", Tools: func(_ context.Context, t tool.Turn) ([]*tool.Tool, error) {
		if t.AgentID != "ops-agent" {
			return nil, nil
		}
		return []*tool.Tool{admin}, nil
	}}
	ts, _ := c.Tools(context.Background(), tool.Turn{AgentID: "ops-agent"})
	fmt.Println(len(ts), c.Validate())
	// Output: 1 <nil>
}

func ExampleCallFrom() {
	whoami := tool.Must(tool.Def[struct{}]{
		Spec: tool.Spec{Name: "whoami", Description: "Say which agent and turn call.", ReadOnly: true},
		Execute: func(ctx context.Context, _ struct{}) (tool.Result, error) {
			c, _ := tool.CallFrom(ctx)
			return tool.Result{Content: fmt.Sprintf("%s/%s step %d call %s", c.AgentID, c.TurnID, c.Step, c.CallID)}, nil
		},
	})
	out := tool.Checker{Call: tool.Call{AgentID: "a1", TurnID: "t1", Step: 3, CallID: "call_9"}}.Check(context.Background(), whoami, `{}`)
	fmt.Println(out.Output)
	// Output: a1/t1 step 3 call call_9
}

func ExampleReportProgress() {
	count := tool.Must(tool.Def[struct{}]{
		Spec: tool.Spec{Name: "count", Description: "Count to three.", ReadOnly: true},
		Execute: func(ctx context.Context, _ struct{}) (tool.Result, error) {
			for i := int64(1); i <= 3; i++ {
				tool.ReportProgress(ctx, i, 3, "counting")
			}
			return tool.Result{Content: "3"}, nil
		},
	})
	c := tool.Checker{Progress: func(done, total int64, label string) { fmt.Println(label, done, "of", total) }}
	fmt.Println(c.Check(context.Background(), count, `{}`).Output)
	// Output:
	// counting 1 of 3
	// counting 2 of 3
	// counting 3 of 3
	// 3
}
