// Package tools runs the tools of package tool: Prepare validates (and
// where the tool allows, repairs) the model's argument string and decodes
// it, writing the model what to fix when it does not fit; Invocation.Run
// executes the call, turning panics and plain errors into coded errors.
// Nothing here knows about turns or NATS: package turn assembles and
// dispatches tools.
//
// The tool types once lived here; the aliases that remain are
// deprecated, for the packages that still name them here.
package tools
