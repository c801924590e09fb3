package fairshare

import (
	"fmt"
	"strconv"
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
func BenchmarkFairIntake(b *testing.B) { benchIntake(b, false) }

// BenchmarkFairIntakeLive is BenchmarkFairIntake with the burst
// published while the intake runs, as in a real burst (the server stores
// and delivers at once), for each size of the intake's pulls; then one step
// of another key. It reports the burst's steps/s to that step's start and
// the process's CPU per burst step (server, publisher and intake together:
// the figure to read on a loaded machine).
func BenchmarkFairIntakeLive(b *testing.B) { benchIntake(b, true) }

// benchIntake runs the intake benchmarks for each size of the intake's
// pulls, the burst published before the intake starts or while it runs.
func benchIntake(b *testing.B, live bool) {
	for _, pull := range []int{512, 2048, 8192} {
		b.Run("pull="+strconv.Itoa(pull), func(b *testing.B) {
			r := newFairRig(b, 1)
			if !live {
				publishBurst(b, r)
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
			f.Grace, f.Pull = time.Second, pull
			var stop func()
			if live {
				stop = r.run(f)
				time.Sleep(100 * time.Millisecond) // the intake's first pull is out
			}
			cpu0 := cpuTime()
			b.ResetTimer()
			if live {
				publishBurst(b, r)
			} else {
				stop = r.run(f)
			}
			r.publish("quiet", "", 0, 1)
			<-quiet
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/step")
			close(release)
			stop()
		})
	}
}

// BenchmarkPullFloor is BenchmarkFairIntake's floor: the same burst
// pulled by a bare consumer that does nothing with a step, as fast as the
// server delivers. The ratio of the two is what the intake adds per step.
func BenchmarkPullFloor(b *testing.B) {
	r := newFairRig(b, 1)
	publishBurst(b, r)
	cons, err := r.js.Consumer(b.Context(), protocol.StreamCalls, protocol.ConsumerCalls)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	n := 0
	b.ResetTimer()
	cc, err := cons.Consume(func(jetstream.Msg) {
		if n++; n == b.N {
			close(done)
		}
	}, jetstream.PullMaxMessages(512), jetstream.PullHeartbeat(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
	cc.Stop()
}

// publishBurst stores b.N steps of key burst in TURN_CALLS, published
// async as a burst would be, in rounds of 1,000: more outstanding at once
// stalls the client on a loaded machine (the benchmark failed so).
func publishBurst(b *testing.B, r *fairRig) {
	for i := range b.N {
		turnID := fmt.Sprintf("burst-%d", i)
		data := fmt.Sprintf(`{"agent_id":"burst","turn_id":%q,"step":0,"context":{"kind":"text"},"output":[]}`, turnID)
		if _, err := r.js.PublishAsync(protocol.Subject(protocol.PrefixCall, "burst", turnID), []byte(data), jetstream.WithMsgID(protocol.StepMsgID("burst", turnID, 0))); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 || i == b.N-1 {
			select {
			case <-r.js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("publishing the burst took over a minute")
			}
		}
	}
}
