package catalog

import (
	"os"
	"testing"

	"github.com/agentbull/toolruntime/internal/natstest"
)

// TestMain runs up to four parallel tests per core (natstest.WaitingParallel):
// they wait on NATS round trips, redeliveries and restarts.
func TestMain(m *testing.M) {
	natstest.WaitingParallel()
	os.Exit(m.Run())
}
