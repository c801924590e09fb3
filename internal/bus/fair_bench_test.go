package bus

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/protocol"
)

// BenchmarkFairIntake measures how fast the intake gets through a burst:
// b.N steps of one key wait in TURN_CALLS (their handlers hold every slot
// the key may take), then one step of another key is published; the time
// until its handler starts, over b.N, is the intake's cost per burst step
// (reported also as steps/s).
func BenchmarkFairIntake(b *testing.B) {
	r := newFairRig(b, 1)
	// Published async, in one go, as a burst would be.
	for i := range b.N {
		turnID := fmt.Sprintf("burst-%d", i)
		data := fmt.Sprintf(`{"agent_id":"burst","turn_id":%q,"step":0,"context":{"kind":"text"},"output":[]}`, turnID)
		if _, err := r.js.PublishAsync(protocol.Subject(protocol.PrefixCall, "burst", turnID), []byte(data), jetstream.WithMsgID(protocol.StepMsgID("burst", turnID, 0))); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-r.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publishing the burst took over a minute")
	}
	release := make(chan struct{})
	quiet := make(chan struct{}, 1)
	f := r.fair(r.js, 256, 0, func(subject string) error {
		if subject == protocol.Subject(protocol.PrefixCall, "quiet", "quiet-0") {
			quiet <- struct{}{}
			return nil
		}
		<-release
		return nil
	})
	f.Grace = time.Second
	b.ResetTimer()
	stop := r.run(f)
	r.publish("quiet", "", 0, 1)
	<-quiet
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
	close(release)
	stop()
}
