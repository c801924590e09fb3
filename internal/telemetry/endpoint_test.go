package telemetry_test

import (
	"testing"

	"github.com/agentbull/toolruntime/internal/telemetry"
)

func TestCheckEndpoint(t *testing.T) {
	for _, c := range []struct {
		ep      string
		fromEnv bool
		ok      bool
	}{
		{"localhost:4318", false, true},
		{"http://collector:4318", false, true},
		{"https://collector.example.com/v1/traces", false, true},
		{"http://[::1]:4318", true, true},
		{"::bad url", false, false},
		{"grpc://collector:4317", false, false},
		{"http://", false, false},
		{"collector:99999", false, false},
		{"localhost:4318", true, false}, // the variable is a URL
	} {
		if err := telemetry.CheckEndpoint(c.ep, c.fromEnv); (err == nil) != c.ok {
			t.Errorf("CheckEndpoint(%q, env %v) = %v, want ok %v", c.ep, c.fromEnv, err, c.ok)
		}
	}
}
