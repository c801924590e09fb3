package worker

import (
	"os"
	"testing"
)

// The GC target follows the server the process holds: 200 beside the
// embedded server, 400 when it joins another; a flag or WORKER_GC_PERCENT
// beats either.
func TestGCPercentFollowsTheServer(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{name: "embedded", want: embeddedGCPercent},
		{name: "joins a server", args: []string{"--nats-url", "nats://example.invalid:4222"}, want: defaultGCPercent},
		{name: "joins from NATS_URL", env: map[string]string{"NATS_URL": "nats://example.invalid:4222"}, want: defaultGCPercent},
		{name: "flag beside the embedded server", args: []string{"--gc-percent", "400"}, want: 400},
		{name: "variable beside the embedded server", env: map[string]string{"WORKER_GC_PERCENT": "150"}, want: 150},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"NATS_URL", "NATS_CONTEXT", "WORKER_NATS_URL", "WORKER_GC_PERCENT"} {
				t.Setenv(k, "") // restored at the end
				if err := os.Unsetenv(k); err != nil {
					t.Fatal(err)
				}
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			m := newProgram(Config{})
			if err := m.ParseFlags(c.args); err != nil {
				t.Fatal(err)
			}
			if m.GCPercent != c.want {
				t.Errorf("--gc-percent is %d, want %d", m.GCPercent, c.want)
			}
		})
	}
}
