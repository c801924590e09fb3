package tools_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

// WeatherParams are the weather tool's parameters.
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

// Prepare is the check a worker makes before it runs a call: the
// arguments repaired where that loses nothing, validated and decoded.
func ExamplePrepare() {
	inv, err := tools.Prepare(weather, "```json\n{\"city\": \"Porto\"}\n```", 0)
	fmt.Println(inv.Activity, inv.Repairs, err)
	res, _ := inv.Run(context.Background())
	fmt.Println(res.Content)
	_, err = tools.Prepare(weather, `{"town": "Porto"}`, 0)
	fmt.Println(err != nil)
	// Output:
	// Looking up the weather in Porto [strip_fences] <nil>
	// Sunny, 21 degrees in Porto
	// true
}
