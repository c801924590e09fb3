package fairshare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// TestMain runs up to four parallel tests per core (natstest.WaitingParallel):
// they wait on NATS round trips, redeliveries and restarts.
func TestMain(m *testing.M) {
	natstest.WaitingParallel()
	os.Exit(m.Run())
}

// fairRig is a real server (or cluster) with the protocol's topology, and
// a record of the steps the fair consumers handled, in order.
type fairRig struct {
	t    testing.TB
	js   jetstream.JetStream
	topo bus.Topology
	urls string

	mu      sync.Mutex
	handled []string       // "<key>/<n>" in the order handlers started
	times   map[string]int // how often each step was handled
	next    map[string]int // the next turn number of each agent
}

func newFairRig(t testing.TB, replicas int) *fairRig {
	t.Helper()
	r := &fairRig{t: t, times: map[string]int{}, next: map[string]int{}}
	var nc *nats.Conn
	if replicas > 1 {
		c := natstest.StartCluster(t, 3)
		nc = c.Connect(t)
		r.urls = c.URL()
	} else {
		s := natstest.Start(t)
		nc = s.Connect(t)
		r.urls = nc.ConnectedUrl()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r.js = js
	// Retries 50 ms apart: TestFairBacklogRetryAndDeadLetter retries once.
	r.topo = bus.Topology{Replicas: replicas, Storage: jetstream.MemoryStorage, AckWait: 5 * time.Second, RetryDelay: 50 * time.Millisecond}.WithDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bus.Setup(ctx, js, r.topo); err != nil {
		t.Fatal(err)
	}
	return r
}

// publish stores n steps of agent into TURN_CALLS, each naming key and
// weight in context.fairness (none when key is "").
func (r *fairRig) publish(agent, key string, weight float64, n int) {
	r.t.Helper()
	ctx := context.Background()
	for range n {
		i := r.next[agent]
		r.next[agent]++
		fair := ""
		if key != "" {
			fair = fmt.Sprintf(`,"fairness":{"key":%q,"weight":%g}`, key, weight)
		}
		turnID := fmt.Sprintf("%s-%d", agent, i)
		data := fmt.Sprintf(`{"agent_id":%q,"turn_id":%q,"step":0,"context":{"kind":"text"%s},"output":[]}`, agent, turnID, fair)
		if _, err := r.js.Publish(ctx, protocol.Subject(protocol.PrefixCall, agent, turnID), []byte(data), jetstream.WithMsgID(protocol.StepMsgID(agent, turnID, 0))); err != nil {
			r.t.Fatal(err)
		}
	}
}

// fair is a fair consumer of TURN_CALLS whose handler records the step
// and then runs do.
func (r *fairRig) fair(js jetstream.JetStream, concurrency, keySteps int, do func(subject string) error) *Intake {
	return &Intake{
		JS: js, Stream: protocol.StreamCalls, Durable: protocol.ConsumerCalls, Kind: KindCall, Topology: r.topo,
		Concurrency: concurrency, KeySteps: keySteps, Grace: 5 * time.Second, Discover: 50 * time.Millisecond,
		Dead:   &bus.DeadLetters{JS: js, Pub: &bus.Publisher{JS: js}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: func(ctx context.Context, msg jetstream.Msg) error {
			key, _ := KeyOf(msg.Subject(), msg.Data())
			turnID := strings.Split(msg.Subject(), ".")[3]
			n := turnID[strings.LastIndexByte(turnID, '-')+1:]
			r.mu.Lock()
			r.handled = append(r.handled, key+"/"+n)
			r.times[msg.Subject()]++
			r.mu.Unlock()
			return do(msg.Subject())
		},
	}
}

func (r *fairRig) run(f *Intake) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			r.t.Error(err)
		}
	}
}

// waitHandled waits until n steps were handled (each once).
func (r *fairRig) waitHandled(n int) {
	r.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		got := len(r.times)
		r.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Fatalf("only %d of %d steps were handled", len(r.times), n)
}

// order returns the handled steps and checks that none ran twice.
func (r *fairRig) order() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for subj, n := range r.times {
		if n != 1 {
			r.t.Errorf("%s handled %d times", subj, n)
		}
	}
	return append([]string(nil), r.handled...)
}

func sleepy(d time.Duration) func(string) error {
	return func(string) error { time.Sleep(d); return nil }
}

// A quiet agent's step does not wait behind another agent's burst: it is
// handled among the first few, not after the 300 published before it.
func TestFairQuietAgentOvertakesBurst(t *testing.T) {
	r := newFairRig(t, 1)
	r.publish("burst", "", 0, 300)
	r.publish("quiet", "", 0, 1)
	stop := r.run(r.fair(r.js, 4, 0, sleepy(10*time.Millisecond)))
	defer stop()
	r.waitHandled(301)
	order := r.order()
	at := -1
	for i, s := range order {
		if s == "quiet/0" {
			at = i
		}
	}
	// The intake reads the 300 first; while it spills them the burst holds
	// 3 slots of 4 (its bound) and one is kept for another key.
	if at < 0 || at > 60 {
		t.Fatalf("the quiet step was handled at position %d of %d; want among the first 60", at, len(order))
	}
	// The burst's own steps keep their order: they are taken in order,
	// and only steps taken together (at most the 4 slots) may start in
	// either order.
	last := -1
	for _, s := range order {
		if n, ok := strings.CutPrefix(s, "burst/"); ok {
			i, _ := strconv.Atoi(n)
			if i < last-4 {
				t.Fatalf("burst step %d handled after %d", i, last)
			}
			last = max(last, i)
		}
	}
}

// Two keys of weights 1 and 3 with backlog get a quarter and three
// quarters of the steps, on one worker, on a fleet of two, and on a
// three-node cluster with R3 streams.
func TestFairSharesByWeight(t *testing.T) {
	for _, tc := range []struct {
		name              string
		replicas, workers int
	}{{"one worker", 1, 1}, {"two workers", 1, 2}, {"cluster", 3, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.replicas > 1 && testing.Short() {
				t.Skip("starts a three-node cluster")
			}
			r := newFairRig(t, tc.replicas)
			const n = 240
			// Interleaved, as two tenants flooding together.
			for range n / 10 {
				r.publish("agent-a", "tenant-a", 1, 10)
				r.publish("agent-b", "tenant-b", 3, 10)
			}
			for range tc.workers {
				nc, err := nats.Connect(r.urls)
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				js, _ := jetstream.New(nc)
				f := r.fair(js, 4, 0, sleepy(15*time.Millisecond))
				if tc.workers > 1 {
					// Steps a worker holds are its own to run: a fleet shares
					// by weight through the backlog, which every worker
					// serves. With the default hold (512 steps here) the 480
					// would all be held, split between the workers as their
					// pulls happened to fall, and the worker whose share of
					// tenant-b ends first runs only tenant-a (0.62-0.64 seen).
					// A small hold sends the flood to the backlog, as a burst
					// past the hold budget goes.
					f.HoldSteps = 8
				}
				stop := r.run(f)
				defer stop()
			}
			r.waitHandled(2 * n)
			order := r.order()
			// Counted while both keys have plenty waiting: from the 20th
			// step to the moment tenant-b has 40 left.
			var a, b, bDone int
			for i, s := range order {
				isB := strings.HasPrefix(s, "tenant-b/")
				if isB {
					bDone++
				}
				if n-bDone < 40 {
					break
				}
				if i < 20 {
					continue
				}
				if isB {
					b++
				} else {
					a++
				}
			}
			share := float64(b) / float64(a+b)
			t.Logf("tenant-b (weight 3) got %.3f of %d steps", share, a+b)
			if share < 0.65 || share > 0.85 {
				t.Fatalf("tenant-b got %.3f of the steps (a=%d b=%d); want 0.75 ± 0.1", share, a, b)
			}
		})
	}
}

// waitCount waits until n handler runs were recorded.
func waitCount(t *testing.T, r *fairRig, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		got := len(r.handled)
		r.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("only %d of %d steps were handled", len(r.handled), n)
}

// A spilled step that fails is delivered again from the backlog (with a
// hold budget of 2, most steps are spilled); one that
// can never be processed is dead-lettered under its own agent and turn,
// not the backlog's subject.
func TestFairBacklogRetryAndDeadLetter(t *testing.T) {
	r := newFairRig(t, 1)
	r.publish("hog", "", 0, 20)
	var mu sync.Mutex
	failed := map[string]bool{}
	f := r.fair(r.js, 1, 0, func(subject string) error {
		time.Sleep(5 * time.Millisecond)
		switch subject {
		case protocol.Subject(protocol.PrefixCall, "hog", "hog-10"):
			mu.Lock()
			defer mu.Unlock()
			if !failed[subject] {
				failed[subject] = true
				return errors.New("transient")
			}
		case protocol.Subject(protocol.PrefixCall, "hog", "hog-15"):
			return &bus.DeadLetter{Reason: "never"}
		}
		return nil
	})
	f.HoldSteps = 2 // most of the 20 go through the backlog
	stop := r.run(f)
	defer stop()
	waitCount(t, r, 21)
	r.mu.Lock()
	if n := r.times[protocol.Subject(protocol.PrefixCall, "hog", "hog-10")]; n != 2 {
		t.Errorf("the failed step was handled %d times, want 2", n)
	}
	r.mu.Unlock()
	ctx := context.Background()
	dead, err := r.js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	m, err := dead.GetLastMsgForSubject(ctx, protocol.Subject(protocol.PrefixDead, "hog", "hog-15"))
	if err != nil {
		t.Fatalf("no dead letter under turn.dead.hog.hog-15: %v", err)
	}
	if !strings.Contains(m.Header.Get("Dead-Reason"), "never") {
		t.Errorf("dead letter headers %v", m.Header)
	}
	waitEmpty(t, r) // nothing is left behind in either stream
}

func TestBacklogToken(t *testing.T) {
	for _, k := range []string{"a", "tenant.42", "a~b", "x:y-z_1"} {
		if got := BacklogKey(BacklogToken(k)); got != k && !strings.Contains(k, "~") {
			t.Errorf("%q -> %q", k, got)
		}
		if strings.Contains(BacklogToken(k), ".") {
			t.Errorf("token of %q holds a dot", k)
		}
	}
	if BacklogSubject(KindCall, "a.b") == BacklogSubject(KindCall, "a") {
		t.Error("keys share a subject")
	}
}

// FuzzFairKeyOf: whatever the payload, the key is a valid key (or the
// placeholder) and the weight in range.
func FuzzFairKeyOf(f *testing.F) {
	f.Add("turn.call.a.t", []byte(`{"context":{"fairness":{"key":"k.1","weight":2}}}`))
	f.Add("turn.call.a.t", []byte(`{"context":{"fairness":{"key":"","weight":-1}}}`))
	f.Add("turn.call.a", []byte(`{"context":{"fairness":null}}`))
	f.Add("turn.call.a.t", []byte(`{"context":{"fairness":"x"}}`))
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		key, w := KeyOf(subject, data)
		if key != "_" && !protocol.ValidFairKey(key) {
			t.Fatalf("key %q", key)
		}
		if w < protocol.MinFairWeight || w > protocol.MaxFairWeight {
			t.Fatalf("weight %v", w)
		}
	})
}

// agentToken reads what splitting the subject would, without the split.
func FuzzAgentToken(f *testing.F) {
	for _, s := range []string{"turn.call.a1.t1", "turn.call.a1", "turn.call.a1.t1.x", "a..c.d", "...", "", "turn.call..t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		a, ok := agentToken(subject)
		tok := strings.Split(subject, ".")
		if want := len(tok) == 4; ok != want || ok && a != tok[2] {
			t.Fatalf("agentToken(%q) = %q, %v; want %v from %q", subject, a, ok, want, tok)
		}
	})
}

// A key whose backlog is all taken by another worker (its subject count
// is not zero, nothing can be fetched) wins the slot on each listing, but
// its claim is given back when the fetch finds nothing: on one slot, the
// other key's steps are all handled, and the taken step is handled once,
// after its lease ends, too.
func TestFairClaimOfATakenBacklogIsGivenBack(t *testing.T) {
	r := newFairRig(t, 1)
	ctx := context.Background()
	m := nats.NewMsg(BacklogSubject(KindCall, "x"))
	m.Header.Set(bus.HeaderSubject, protocol.Subject(protocol.PrefixCall, "x", "x-0"))
	m.Header.Set(HeaderWeight, "1")
	m.Data = []byte(`{"agent_id":"x","turn_id":"x-0","step":0,"context":{"kind":"text"},"output":[]}`)
	if _, err := r.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	// Another worker's fetch, not acknowledged: the step runs there.
	other, err := r.js.CreateOrUpdateConsumer(ctx, bus.StreamBacklog, jetstream.ConsumerConfig{
		Durable: BacklogDurable(KindCall, "x"), FilterSubject: BacklogSubject(KindCall, "x"),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: r.topo.AckWait, MaxDeliver: r.topo.MaxDeliver,
		MaxAckPending: r.topo.MaxAckPending, MemoryStorage: true, InactiveThreshold: time.Hour,
		Description: "Backlog of fairness key x",
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := other.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	taken := 0
	for range batch.Messages() {
		taken++
	}
	if taken != 1 {
		t.Fatalf("took %d steps of x, want 1", taken)
	}
	r.publish("quiet", "", 0, 20)
	stop := r.run(r.fair(r.js, 1, 0, sleepy(time.Millisecond)))
	defer stop()
	r.waitHandled(21)
	order := r.order()
	quiet := 0
	for _, s := range order {
		if strings.HasPrefix(s, "quiet/") {
			quiet++
		}
	}
	if quiet != 20 || len(order) != 21 {
		t.Fatalf("handled %v; want the 20 quiet steps and x's once", order)
	}
	if order[len(order)-1] != "x/0" {
		t.Errorf("x's step, running elsewhere, was handled at %v before its lease ended", order)
	}
}

// Stats may be asked (by micro stats or the metrics) while Run is still
// setting up and while it serves. Every answer is consistent: key "a"
// alone, of weight 1, its counts within the key's bound and adding up to
// at most the three steps published. Once the three are in, the answer
// is complete: two running (the key's bound) and one queued; once they
// are handled, the key is gone. Under -race, a read of the keys unguarded
// by the lock fails here too.
func TestFairStatsWhileRunStarts(t *testing.T) {
	r := newFairRig(t, 1)
	r.publish("a", "", 0, 3)
	release := make(chan struct{})
	releaseAll := sync.OnceFunc(func() { close(release) })
	f := r.fair(r.js, 4, 2, func(string) error { <-release; return nil })
	// check reports the first inconsistent answer, and says whether
	// the answer was consistent.
	check := func(stats []KeyStat) bool {
		ok := len(stats) <= 1
		for _, s := range stats {
			ok = ok && s.Key == "a" && s.Weight == 1 && s.InFlight >= 0 && s.InFlight <= 2 && s.Queued >= 0 &&
				s.InFlight+s.Queued >= 1 && s.InFlight+s.Queued <= 3
		}
		if !ok {
			t.Errorf("inconsistent stats %+v: want key a alone, of weight 1, at most 2 in flight of the 3 steps", stats)
		}
		return ok
	}
	// A reader from before Run starts until the complete answer is seen.
	stopReading, read := make(chan struct{}), make(chan struct{})
	stopReader := sync.OnceFunc(func() { close(stopReading); <-read })
	defer stopReader()
	go func() {
		defer close(read)
		for {
			select {
			case <-stopReading:
				return
			default:
			}
			if !check(f.Stats(10)) {
				return
			}
			runtime.Gosched()
		}
	}()
	stop := r.run(f)
	defer stop()
	defer releaseAll() // before stop: a failed test does not leave handlers waiting
	waitStats := func(what string, done func([]KeyStat) bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			s := f.Stats(10)
			if !check(s) {
				t.FailNow()
			}
			if done(s) {
				return
			}
			if t.Failed() || time.Now().After(deadline) {
				t.Fatalf("stats %+v, never %s", s, what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	want := KeyStat{Key: "a", Weight: 1, InFlight: 2, Queued: 1}
	waitStats(fmt.Sprintf("%+v", want), func(s []KeyStat) bool { return len(s) == 1 && s[0] == want })
	stopReader()
	releaseAll()
	r.waitHandled(3)
	waitStats("empty once every step was handled", func(s []KeyStat) bool { return len(s) == 0 })
}

// The worker goroutines are started as steps need them, not Concurrency
// at once (a goroutine's record stays in the heap for good), and a
// worker that handled a step takes the next ones.
func TestFairWorkersStartAsNeeded(t *testing.T) {
	r := newFairRig(t, 1)
	const concurrency = 512
	hold := make(chan struct{})
	var in sync.WaitGroup
	in.Add(5)
	var first atomic.Int32
	f := r.fair(r.js, concurrency, concurrency, func(string) error {
		if first.Add(1) <= 5 {
			in.Done()
		}
		<-hold
		return nil
	})
	before := runtime.NumGoroutine()
	stop := r.run(f)
	defer stop()
	r.publish("a1", "", 0, 5)
	in.Wait()
	grew := runtime.NumGoroutine() - before
	close(hold)
	r.waitHandled(5)
	if grew >= concurrency/2 {
		t.Fatalf("%d goroutines more with 5 steps in flight, with a concurrency of %d: workers started up front", grew, concurrency)
	}
	// The next steps go to the workers idle by then, one after the other.
	for i := range 20 {
		r.publish("a1", "", 0, 1)
		r.waitHandled(6 + i)
	}
	f.mu.Lock()
	idle := f.idle
	f.mu.Unlock()
	// 5 when each step found the last one's worker idle; 25 if none was
	// reused. A step published before its predecessor's worker was back
	// (a slow ack on a busy machine) starts one more.
	if idle > 15 {
		t.Fatalf("%d workers idle after 25 steps, at most 5 at once: idle ones were not reused", idle)
	}
	r.order()
}
