// Package conformance is a tool category that serves the fixture tools of
// the MCP conformance suite (npm @modelcontextprotocol/conformance) that a
// fleet can express: text, an image, an embedded file, mixed content, a
// tool error, progress, a JSON Schema 2020-12 input schema, an
// x-mcp-header parameter, two tools of the input-required-result
// scenarios that the conformance script has the worker hold for approval
// (the door's input_required), the tools of the tasks scenarios
// (slow_compute, which the door makes a task past --task-after; failing_job
// and protocol_error_job, a tool error and an error of the worker, which
// the script names in --task-required; confirm_delete, held for approval
// inside a task), and greet, which stays a plain result. The door's
// real-client tests call, cancel and hold some of them too.
//
// It is for tests and scripts/mcp-conformance.sh only: no worker offers it
// unless it is given the category (fixtureworker is cmd/worker with it
// added). Its tools then reach every main turn, unless the turn's context
// binds "mcp_conformance" to false, so that a door's principal without
// bindings sees them.
//
// Data flows as for any category: the suite calls a tool through the door,
// the door publishes a one-call step, a worker runs the tool here, and the
// output (text, media as input_image or input_file) goes back through
// TURN_OUTPUTS to the door, which maps it to MCP content. What the worker's
// outputs cannot carry (audio, MCP logging, server-to-client requests) has
// no fixture here; scripts/mcp-conformance.sh's baselines say why.
package conformance
