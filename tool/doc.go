// Package tool is the public API for writing tools for the tool runtime
// worker: define a typed tool, group tools into a category, and test a
// tool without NATS.
//
// A tool is a [Def] over a parameter struct P: the worker infers the
// parameters schema from P once (or takes [Spec].JSONSchema as written),
// validates and repairs the model's arguments, decodes them into P and
// calls Execute. Execute returns a [Result] whose Content the model reads,
// or an error: an [Error] made with [Errorf] chooses the kind the model
// sees; any other error is a tool_error with its text, and a panic is a
// tool_error too, never a crashed worker.
//
//	type WeatherParams struct {
//		City string `json:"city" jsonschema:"description=The city to report on."`
//	}
//
//	var weather = tool.Must(tool.Def[WeatherParams]{
//		Spec: tool.Spec{Name: "weather", Description: "Report today's weather in a city.", ReadOnly: true},
//		Execute: func(ctx context.Context, p WeatherParams) (tool.Result, error) {
//			return tool.Result{Content: "Sunny in " + p.City}, nil
//		},
//	})
//
// A [Category] is what a worker offers a turn: [NewCategory] offers fixed
// tools to the turns whose context binds the category's name; a Category
// with its own Tools function reads the [Turn] (the agent, the bindings)
// and builds the tools for it. Package
// github.com/agentbull/toolruntime/worker runs categories in a worker
// process.
//
// Package github.com/agentbull/toolruntime/tool/tooltest runs one call of
// a tool as the worker would (the repair ladder, validation, the time
// limit, a panic or a hang turned into an error output) and returns what
// the model would read, so a tool's tests need no NATS server.
package tool
