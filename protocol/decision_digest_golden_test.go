package protocol

import "testing"

// The digests are a contract between workers and consoles of different
// versions: a change to how they are computed must show here first.
func TestDecisionDigestsAreStable(t *testing.T) {
	args := []byte(`{"command": "ls <x>"}`)
	for _, tt := range []struct{ got, want string }{
		{DecisionDigest("call_1", "", "run_command", args), "sha256:QKQlNiWCm2gL4KeV_swFBwVUQ-BtJuOcf6uHyA0qq50"},
		{StepDecisionDigest("a1", "t1", 3, 1, "call_1", "", "run_command", args), "sha256:v5Bri0k8ybD4NBtQuqbAOQYh_EWS57A7zFo5iC7Zdwg"},
		{StepDecisionDigest("a1", "t1", 3, 0, "call_1", "", "run_command", args), "sha256:v5Bri0k8ybD4NBtQuqbAOQYh_EWS57A7zFo5iC7Zdwg"},
	} {
		if tt.got != tt.want {
			t.Errorf("digest %s, want %s", tt.got, tt.want)
		}
	}
}
