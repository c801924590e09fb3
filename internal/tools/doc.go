// Package tools is the home of one call of a tool (package tool), from
// the model's argument string to what the model reads back. A step's path
// is turn (the turn's tools, the step's calls and their order) → tools
// (one call) → the tool's Execute.
//
//   - Prepare parses the argument string: up the repair ladder of
//     internal/schema when it does not parse (never a guessing rung for a
//     destructive tool), validated against the tool's full schema and
//     decoded into its parameters, or refused with an invalid_arguments
//     error that tells the model what to fix. Validate is the same check
//     without the decoding (the value a call held for approval runs with).
//   - Invocation.Run runs the call in its CallContext, which carries the
//     call's identity (tool.CallFrom), its progress receiver
//     (tool.ReportProgress) and its deadline; a panic or a plain error
//     becomes a tool_error.
//   - Classify decides the kind of a failed run (the clock and the
//     parent's end before what the tool said), and FailureText is what the
//     model reads of it.
//
// A tool reaches this package through internal/toolhooks: what tool.New
// built for the worker (the compiled schema, the decoding into the
// parameter type) is not part of package tool's API. Nothing here knows
// about turns, journals or NATS.
package tools
