package tooltest_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentbull/toolruntime/tool"
	"github.com/agentbull/toolruntime/tool/tooltest"
)

// WeatherParams are the weather tool's parameters.
type WeatherParams struct {
	City string `json:"city" jsonschema:"description=The city to report on."`
	Unit string `json:"unit,omitempty" jsonschema:"enum=celsius,enum=fahrenheit"`
}

var weather = tool.Must(tool.Def[WeatherParams]{
	Spec: tool.Spec{Name: "weather", Description: "Report today's weather in a city.", ReadOnly: true},
	Execute: func(ctx context.Context, p WeatherParams) (tool.Result, error) {
		if strings.TrimSpace(p.City) == "" {
			return tool.Result{}, tool.Errorf(tool.InvalidArguments, "city is empty; give a city's name")
		}
		return tool.Result{Content: "Sunny, 21 degrees in " + p.City}, nil
	},
})

func ExampleCheck() {
	ctx := context.Background()
	// The model's arguments as it sent them: a trailing comma is repaired.
	out := tooltest.Check(ctx, weather, `{"city": "Lisbon",}`)
	fmt.Println(out.Output, out.Repairs)
	// An argument the schema refuses: the model reads why, and the schema.
	out = tooltest.Check(ctx, weather, `{"city": "Lisbon", "unit": "kelvin"}`)
	fmt.Println(out.Err.Kind)
	// The tool's own refusal.
	out = tooltest.Check(ctx, weather, `{"city": " "}`)
	fmt.Println(out.Output)
	// Output:
	// Sunny, 21 degrees in Lisbon [trailing_commas]
	// invalid_arguments
	// Error (invalid_arguments): city is empty; give a city's name
}

// The call's identity, as tool.CallFrom returns it inside the tool.
func ExampleChecker() {
	whoami := tool.Must(tool.Def[struct{}]{
		Spec: tool.Spec{Name: "whoami", Description: "Say which agent and turn call.", ReadOnly: true},
		Execute: func(ctx context.Context, _ struct{}) (tool.Result, error) {
			c, _ := tool.CallFrom(ctx)
			return tool.Result{Content: fmt.Sprintf("%s/%s step %d call %s", c.AgentID, c.TurnID, c.Step, c.CallID)}, nil
		},
	})
	out := tooltest.Checker{Call: tool.Call{AgentID: "a1", TurnID: "t1", Step: 3, CallID: "call_9"}}.Check(context.Background(), whoami, `{}`)
	fmt.Println(out.Output)
	// Output: a1/t1 step 3 call call_9
}

// The reports of tool.ReportProgress.
func ExampleChecker_progress() {
	count := tool.Must(tool.Def[struct{}]{
		Spec: tool.Spec{Name: "count", Description: "Count to three.", ReadOnly: true},
		Execute: func(ctx context.Context, _ struct{}) (tool.Result, error) {
			for i := int64(1); i <= 3; i++ {
				tool.ReportProgress(ctx, i, 3, "counting")
			}
			return tool.Result{Content: "3"}, nil
		},
	})
	c := tooltest.Checker{Progress: func(done, total int64, label string) { fmt.Println(label, done, "of", total) }}
	fmt.Println(c.Check(context.Background(), count, `{}`).Output)
	// Output:
	// counting 1 of 3
	// counting 2 of 3
	// counting 3 of 3
	// 3
}
