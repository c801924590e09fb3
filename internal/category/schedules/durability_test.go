package schedules_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/schedules"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// invoke runs one of the service's tools as the dispatcher would.
func invoke(t *testing.T, svc *schedules.Service, name, args string) tool.Result {
	t.Helper()
	ts, err := svc.Category().Tools(context.Background(), tool.Turn{AgentID: "a1", TurnID: "t1", Bindings: bound})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range ts {
		if tl.Name() != name {
			continue
		}
		inv, err := tools.Prepare(tl, args, 0)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := inv.Run(tools.WithCall(ctx, tool.Call{AgentID: "a1", TurnID: "t1", CallID: "c1"}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	t.Fatalf("no tool %s", name)
	return tool.Result{}
}

func idOf(t *testing.T, res tool.Result) string {
	t.Helper()
	raw, _ := json.Marshal(res.Details)
	var d struct {
		ScheduleID string `json:"schedule_id"`
	}
	if err := json.Unmarshal(raw, &d); err != nil || d.ScheduleID == "" {
		t.Fatalf("details %s", raw)
	}
	return d.ScheduleID
}

// countFires counts the messages fired on subject from now for d,
// failing on two for the same slot (the same Nats-Schedule-Next): a
// duplicate fire. Fires may come late under load, never twice.
func countFires(t *testing.T, js jetstream.JetStream, subject string, d time.Duration) int {
	t.Helper()
	return countFiresUpTo(t, js, subject, d, 0)
}

// countFiresUpTo is countFires that returns as soon as it counted enough
// fires (0: never before d), for a test that needs at least that many.
func countFiresUpTo(t *testing.T, js jetstream.JetStream, subject string, d time.Duration, enough int) int {
	t.Helper()
	from := time.Now()
	end := from.Add(d)
	var c jetstream.Consumer
	var err error
	// Right after a node went down the stream may be electing a leader.
	for deadline := time.Now().Add(20 * time.Second); ; {
		c, err = js.OrderedConsumer(context.Background(), protocol.StreamSchedules, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &from,
		})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	n := 0
	slots := map[string]bool{}
	for {
		wait := time.Until(end)
		if wait < 100*time.Millisecond {
			wait = 100 * time.Millisecond // what is stored before end is delivered by now
		}
		m, err := c.Next(jetstream.FetchMaxWait(wait))
		if err != nil {
			if time.Now().After(end) {
				return n
			}
			continue
		}
		meta, _ := m.Metadata()
		if meta.Timestamp.After(end) {
			return n
		}
		slot := m.Headers().Get(protocol.HeaderScheduleNext)
		if slots[slot] {
			t.Errorf("two fires for the slot before %s", slot)
		}
		slots[slot] = true
		n++
		if n == enough {
			return n
		}
	}
}

// TestScheduleSurvivesRestart: the schedule is the server's, stored in
// the stream: it fires again after the server restarts, with no worker
// involved.
func TestScheduleSurvivesRestart(t *testing.T) {
	t.Parallel() // its own server(s); it waits for fires, not CPU
	s := natstest.Start(t)
	js := s.JetStream(t)
	svc, err := schedules.New(context.Background(), js, schedules.Config{MinInterval: time.Second, FireTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	id := idOf(t, invoke(t, svc, schedules.CreateName, `{"instructions":"tick","every":"1s"}`))
	if n := countFiresUpTo(t, js, schedules.FireSubject("a1", id), 3*time.Second, 1); n < 1 {
		t.Fatalf("%d fires before the restart", n)
	}
	s.Restart()
	if n := countFiresUpTo(t, js, schedules.FireSubject("a1", id), 4*time.Second, 2); n < 2 {
		t.Fatalf("%d fires after the restart", n)
	}
}

// TestScheduleInCluster: on a three-node cluster with the stream
// replicated three times, a schedule fires once per interval (the
// replicas do not each fire it), keeps firing when the stream's leader
// goes down, and a delete stops it.
func TestScheduleInCluster(t *testing.T) {
	t.Parallel() // its own server(s); it waits for fires, not CPU
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := natstest.StartCluster(t, 3)
	js := c.JetStream(t)
	svc, err := schedules.New(context.Background(), js, schedules.Config{Replicas: 3, MinInterval: time.Second, FireTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	id := idOf(t, invoke(t, svc, schedules.CreateName, `{"instructions":"tick","every":"1s"}`))
	subject := schedules.FireSubject("a1", id)
	if n := countFires(t, js, subject, 4*time.Second); n < 2 || n > 5 {
		t.Fatalf("%d fires in 4s at one a second", n)
	}
	// The stream fired, yet its leader may be between two elections on a
	// loaded host: wait for one.
	var leader *natstest.Node
	elected := time.Now().Add(30 * time.Second)
	for leader = c.StreamLeader(protocol.StreamSchedules); leader == nil && time.Now().Before(elected); leader = c.StreamLeader(protocol.StreamSchedules) {
		time.Sleep(50 * time.Millisecond)
	}
	if leader == nil {
		t.Fatal("no stream leader in 30 s")
	}
	leader.Stop()
	// Two fires prove it goes on; it need not wait out the whole 8 s.
	if n := countFiresUpTo(t, js, subject, 8*time.Second, 2); n < 2 {
		t.Fatalf("%d fires in 8s after the leader %s stopped", n, leader.Name)
	}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	// Let the restarted node catch up before the delete: a delete that a
	// lagging replica has not seen yet could be followed by its fires.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := js.Stream(context.Background(), protocol.StreamSchedules)
		if err == nil {
			info, err := st.Info(context.Background())
			if err == nil && info.Cluster != nil && len(info.Cluster.Replicas) == 2 && allCurrent(info.Cluster.Replicas) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the restarted node never caught up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	invoke(t, svc, schedules.DeleteName, `{"schedule_id":"`+id+`"}`)
	time.Sleep(1500 * time.Millisecond)
	if n := countFires(t, js, subject, 3*time.Second); n != 0 {
		t.Fatalf("%d fires after the delete", n)
	}
}

func allCurrent(rs []*jetstream.PeerInfo) bool {
	for _, r := range rs {
		if !r.Current || r.Offline {
			return false
		}
	}
	return true
}
