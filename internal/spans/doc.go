// Package spans starts the worker's trace spans with the names and
// attributes of the OpenTelemetry semantic conventions: GenAI for tool
// execution (execute_tool {gen_ai.tool.name}), messaging for what crosses
// NATS (process and publish, messaging.system=nats), and MCP for calls to
// MCP servers. The names live here so that each place that makes a span
// does it in one line, and so that a change of convention is one file.
//
// The functions that take no tracer make a child of the span in ctx with
// that span's provider, and nothing when ctx carries no recording span:
// packages that publish or call out need no tracer of their own.
package spans
