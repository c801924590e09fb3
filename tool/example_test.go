package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
	"github.com/agentbull/toolruntime/tool/tooltest"
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

// A result with a presentation event for user interfaces, which read it
// in the call's output event; the model reads only Content.
func ExampleResult() {
	chart := tool.Must(tool.Def[struct{}]{
		Spec: tool.Spec{Name: "weekly_sales", Description: "Chart this week's sales.", ReadOnly: true},
		Execute: func(context.Context, struct{}) (tool.Result, error) {
			data, err := json.Marshal(map[string][]int{"sales": {3, 5, 8}})
			if err != nil {
				return tool.Result{}, err
			}
			return tool.Result{Content: "Sales rose every day this week.",
				Events: []protocol.PresentationEvent{{Type: "chart", Data: data}}}, nil
		},
	})
	out := tooltest.Check(context.Background(), chart, `{}`)
	fmt.Println(out.Output)
	fmt.Println(out.Events[0].Type, string(out.Events[0].Data))
	// Output:
	// Sales rose every day this week.
	// chart {"sales":[3,5,8]}
}
