// Command worker runs the tool runtime worker with its built-in tool
// categories. With no configuration it starts an embedded NATS server with
// JetStream on 127.0.0.1:4222 (monitoring on 8222) and serves on it; with
// --nats-url (or NATS_URL) it joins an existing server or cluster. Every
// flag can also be set from the environment: --call-timeout is
// WORKER_CALL_TIMEOUT, and so on. The program is package worker's Main;
// the flags are in worker/flags.go.
package main

import (
	"context"

	"github.com/agentbull/toolruntime/worker"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	worker.Main(context.Background(), worker.Config{Version: version})
}
