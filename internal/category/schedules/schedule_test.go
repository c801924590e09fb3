package schedules_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/schedules"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// TestMain runs up to four parallel tests per core (natstest.WaitingParallel):
// they wait for schedules to fire.
func TestMain(m *testing.M) {
	natstest.WaitingParallel()
	os.Exit(m.Run())
}

// golden compares v, as indented JSON, with testdata/name.
var golden = goldenfile.JSON

func category(t *testing.T) setup {
	return func(js jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		s, err := schedules.New(context.Background(), js, schedules.Config{Storage: jetstream.MemoryStorage, MinInterval: time.Second, FireTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return []tool.Category{s.Category()}, nil
	}
}

var bound = map[string]bool{schedules.Binding: true}

// fires reads the messages a schedule fires, as a gateway would.
type fires struct {
	t *testing.T
	c jetstream.Consumer
}

func watchFires(t *testing.T, g *gateway, agent, id string) *fires {
	t.Helper()
	c, err := g.JS.OrderedConsumer(context.Background(), protocol.StreamSchedules, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{schedules.FireSubject(agent, id)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &fires{t: t, c: c}
}

// next waits up to d for the next fired message; nil when none came.
func (f *fires) next(d time.Duration) jetstream.Msg {
	m, err := f.c.Next(jetstream.FetchMaxWait(d))
	if err != nil {
		return nil
	}
	return m
}

func createdID(t *testing.T, o output) string {
	t.Helper()
	var d struct {
		ScheduleID string `json:"schedule_id"`
	}
	if o.Status != "ok" || json.Unmarshal(o.Details, &d) != nil || d.ScheduleID == "" {
		t.Fatalf("create_schedule: %s", o.Raw)
	}
	return d.ScheduleID
}

// TestScheduleFires creates an interval schedule and a one-off on worker
// A, sees both fire on their subjects, lists on worker B, deletes the
// interval schedule and sees it stop.
func TestScheduleFires(t *testing.T) {
	t.Parallel() // its own server(s); it waits for fires, not CPU
	s := natstest.Start(t)
	g := newGateway(t, s)
	stopA := runWorker(t, s, "A", category(t))
	at := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
	outs := g.Run("a1", "t1", 0, bound,
		fc("c1", schedules.CreateName, `{"name":"inbox","instructions":"Check the inbox and summarise it.","every":"1s"}`),
		fc("c2", schedules.CreateName, `{"instructions":"Remind me of the call.","at":"`+at+`"}`),
	)
	every, once := createdID(t, outs["c1"]), createdID(t, outs["c2"])
	if got := outs["c1"].Item.Output; !strings.HasPrefix(got, "Created schedule "+every+" (every 1s); it first fires at ") {
		t.Errorf("create output: %s", got)
	}
	everyFires, onceFires := watchFires(t, g, "a1", every), watchFires(t, g, "a1", once)

	// The interval schedule fires every second, with its definition as
	// the body and the scheduler's headers.
	var last time.Time
	for i := range 2 {
		m := everyFires.next(15 * time.Second)
		if m == nil {
			t.Fatalf("fire %d of the interval schedule never came", i)
		}
		var sc protocol.ScheduleFire
		if err := json.Unmarshal(m.Data(), &sc); err != nil {
			t.Fatal(err)
		}
		if sc.ScheduleID != every || sc.AgentID != "a1" || sc.Instructions != "Check the inbox and summarise it." || sc.Name != "inbox" ||
			sc.Kind != schedules.KindEvery || sc.Expression != "1s" || sc.CreatedBy.TurnID != "t1" || sc.CreatedBy.CallID != "c1" {
			t.Errorf("fired body %s", m.Data())
		}
		h := m.Headers()
		if h.Get(protocol.HeaderScheduler) != schedules.DefSubject("a1", every) || h.Get(jetstream.MsgTTLHeader) != "1h0m0s" {
			t.Errorf("fired headers %v", h)
		}
		meta, _ := m.Metadata()
		next, err := time.Parse(time.RFC3339Nano, h.Get(protocol.HeaderScheduleNext))
		if err != nil || !next.After(meta.Timestamp.Add(-time.Second)) {
			t.Errorf("Nats-Schedule-Next %q for a message fired at %s", h.Get(protocol.HeaderScheduleNext), meta.Timestamp)
		}
		if i > 0 && meta.Timestamp.Sub(last) > 5*time.Second {
			t.Errorf("fires %s apart", meta.Timestamp.Sub(last))
		}
		last = meta.Timestamp
	}
	// The one-off fires once and is then gone.
	m := onceFires.next(20 * time.Second)
	if m == nil {
		t.Fatal("the one-off schedule never fired")
	}
	if h := m.Headers().Get(protocol.HeaderScheduleNext); h != "purge" {
		t.Errorf("one-off Nats-Schedule-Next %q, want purge", h)
	}
	if meta, _ := m.Metadata(); meta.Timestamp.Before(time.Now().Add(-30*time.Second)) || meta.Timestamp.Format(time.RFC3339) < at {
		t.Errorf("one-off fired at %s, scheduled for %s", meta.Timestamp, at)
	}
	if m := onceFires.next(2500 * time.Millisecond); m != nil {
		t.Errorf("the one-off fired again: %s", m.Headers())
	}
	stopA()

	// Worker B lists what worker A created: the one-off is gone.
	runWorker(t, s, "B", category(t))
	outs = g.Run("a1", "t1", 1, bound, fc("l1", schedules.ListName, `{}`))
	list := outs["l1"].Item.Output
	t.Logf("list_schedules:\n%s", list)
	if !strings.HasPrefix(list, "1 schedule:\n- "+every+` "inbox": every 1s; next `) || !strings.Contains(list, "; last fired ") ||
		!strings.Contains(list, "instructions: Check the inbox") || strings.Contains(list, once) {
		t.Errorf("list:\n%s", list)
	}

	// Deleting stops it: after what was in flight, nothing more.
	outs = g.Run("a1", "t1", 2, bound, fc("d1", schedules.DeleteName, `{"schedule_id":"`+every+`"}`))
	if got := outs["d1"].Item.Output; !strings.HasPrefix(got, "Deleted schedule "+every) {
		t.Fatalf("delete: %s", outs["d1"].Raw)
	}
	deleted := time.Now()
	for m := everyFires.next(1500 * time.Millisecond); m != nil; m = everyFires.next(1500 * time.Millisecond) {
		if meta, _ := m.Metadata(); meta.Timestamp.After(deleted.Add(time.Second)) {
			t.Fatalf("fired at %s, after the delete at %s", meta.Timestamp, deleted)
		}
	}
	if m := everyFires.next(4 * time.Second); m != nil {
		meta, _ := m.Metadata()
		t.Fatalf("fired at %s, %s after the delete", meta.Timestamp, meta.Timestamp.Sub(deleted))
	}
	outs = g.Run("a1", "t1", 3, bound,
		fc("l2", schedules.ListName, `{}`),
		fc("d2", schedules.DeleteName, `{"schedule_id":"`+every+`"}`),
	)
	if got := outs["l2"].Item.Output; got != "You have no schedules." {
		t.Errorf("list after delete: %s", got)
	}
	if o := outs["d2"]; o.Error == nil || o.Error.Kind != "tool_error" || !strings.Contains(o.Item.Output, "You have no schedule "+every) {
		t.Errorf("second delete: %s", o.Raw)
	}
}

// TestBadExpressionsRejected: every bad expression is refused with a
// message saying what is wrong, and nothing reaches the stream.
func TestBadExpressionsRejected(t *testing.T) {
	s := natstest.Start(t)
	g := newGateway(t, s)
	runWorker(t, s, "A", func(js jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		sv, err := schedules.New(context.Background(), js, schedules.Config{Storage: jetstream.MemoryStorage})
		if err != nil {
			t.Fatal(err)
		}
		return []tool.Category{sv.Category()}, nil
	})
	cases := map[string]struct{ args, want string }{
		"cron5":  {`{"instructions":"x","cron":"0 9 * * *"}`, `cron "0 9 * * *" has 5 fields; it needs 6`},
		"cronF":  {`{"instructions":"x","cron":"0 0 9 * * funday"}`, `field 6 (day of week): "funday" is neither a number from 0 to 6 nor a name (sun-sat)`},
		"past":   {`{"instructions":"x","at":"2001-01-01T00:00:00Z"}`, "at 2001-01-01T00:00:00Z is in the past"},
		"short":  {`{"instructions":"x","every":"10s"}`, "every 10s is shorter than the minimum interval 1m0s"},
		"tz":     {`{"instructions":"x","cron":"0 0 9 * * *","time_zone":"Europe/Atlantis"}`, `unknown time_zone "Europe/Atlantis"`},
		"two":    {`{"instructions":"x","cron":"0 0 9 * * *","every":"1h"}`, "give exactly one of at"},
		"none":   {`{"instructions":"x"}`, "give exactly one of at"},
		"blank":  {`{"instructions":"  ","every":"1h"}`, "the instructions are empty"},
		"cronSS": {`{"instructions":"x","cron":"*/5 * * * * *"}`, "fires 5s apart"},
	}
	var calls []call
	for id, c := range cases {
		calls = append(calls, fc(id, schedules.CreateName, c.args))
	}
	outs := g.Run("a1", "t1", 0, bound, calls...)
	for id, c := range cases {
		o := outs[id]
		if o.Error == nil || o.Error.Kind != "invalid_arguments" || !strings.HasPrefix(o.Error.Message, "Nothing was scheduled: ") || !strings.Contains(o.Error.Message, c.want) {
			t.Errorf("%s: %s\nwant invalid_arguments containing %q", id, o.Raw, c.want)
		}
	}
	st, err := g.JS.Stream(context.Background(), protocol.StreamSchedules)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("%d messages in %s after rejected calls", info.State.Msgs, protocol.StreamSchedules)
	}
}

// TestStreamIdempotent: a second worker's setup finds the stream as it
// needs it.
func TestStreamIdempotent(t *testing.T) {
	s := natstest.Start(t)
	js := s.JetStream(t)
	cfg := schedules.Config{Storage: jetstream.MemoryStorage}
	for range 2 {
		if _, err := schedules.New(context.Background(), js, cfg); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Storage = jetstream.FileStorage
	if _, err := schedules.New(context.Background(), js, cfg); err == nil {
		t.Error("a stream of another storage type was accepted")
	}
}

// TestCatalog pins when the schedule tools are present.
func TestCatalog(t *testing.T) {
	s := natstest.Start(t)
	g := newGateway(t, s)
	runWorker(t, s, "A", category(t))
	golden(t, "catalog.json", g.CategoryCatalog(schedules.Binding))
}
