// Command fixtureworker is cmd/worker with the MCP conformance suite's
// fixture tools added (package conformance): the same flags, environment
// and embedded NATS server. scripts/mcp-conformance.sh runs it in place of
// cmd/worker, so that the door serves the fixtures; nothing else does.
package main

import (
	"context"

	"github.com/agentbull/toolruntime/internal/mcpdoor/conformance"
	"github.com/agentbull/toolruntime/worker"
)

func main() {
	worker.Main(context.Background(), worker.Config{}, conformance.Category())
}
