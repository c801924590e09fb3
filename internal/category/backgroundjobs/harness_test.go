package backgroundjobs_test

import "github.com/agentbull/toolruntime/internal/workertest"

// The shared harness, under the names these tests use.
type (
	setup   = workertest.Setup
	gateway = workertest.Gateway
	output  = workertest.Output
	call    = workertest.Call
)

var (
	runWorker  = workertest.RunWorker
	newGateway = workertest.NewGateway
	fc         = workertest.FC
	testLogger = workertest.Logger
)
