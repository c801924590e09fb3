package turnstate_test

import (
	"testing"

	"github.com/agentbull/toolruntime/internal/turnstate"
	"github.com/agentbull/toolruntime/protocol"
)

// FuzzParseStepCancel: any turn.cancel.step message is read or dropped,
// and what is read names valid ids and a step.
func FuzzParseStepCancel(f *testing.F) {
	f.Add("turn.cancel.step.a1.t1", []byte(`{"step":3,"reason":"stop"}`))
	f.Add("turn.cancel.step.a1", []byte(`{"step":-1}`))
	f.Add("turn.cancel.step.a.b.c", []byte(`x`))
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		a, tr, c, ok := turnstate.ParseStepCancel(subject, data)
		if ok && (!protocol.ValidID(a) || !protocol.ValidID(tr) || c.Step < 0) {
			t.Fatalf("read %q %q %+v", a, tr, c)
		}
	})
}
