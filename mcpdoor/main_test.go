package mcpdoor_test

import (
	"os"
	"testing"

	"github.com/agentbull/toolruntime/internal/natstest"
)

// TestMain runs up to four parallel tests per core (natstest.
// WaitingParallel): the parallel tests mostly wait on Node clients, the
// worker and NATS round trips, and with one per core a 2-core machine ran
// two of them at a time. The flood, pacing and timing tests are serial,
// so they never share the machine with these.
func TestMain(m *testing.M) {
	natstest.WaitingParallel()
	os.Exit(m.Run())
}
