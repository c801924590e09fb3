package backgroundjobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/backgroundjobs"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// golden compares v, as indented JSON, with testdata/name.
var golden = goldenfile.JSON

var bound = map[string]bool{backgroundjobs.Binding: true}

// jobsWorker runs a worker with the jobs category and, beside it, the
// service's report watcher, as cmd/worker does. stop ends both.
func jobsWorker(t *testing.T, s *natstest.Server, name string, cfg backgroundjobs.Config) (svc *backgroundjobs.Service, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg.Storage, cfg.AckWait, cfg.Logger = jetstream.MemoryStorage, 2*time.Second, testLogger()
	stopWorker := runWorker(t, s, name, func(js jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		var err error
		if svc, err = backgroundjobs.New(ctx, js, cfg); err != nil {
			t.Fatal(err)
		}
		go func() { done <- svc.Watch(ctx) }()
		return []tool.Category{svc.Category()}, nil
	})
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		stopWorker()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Watch: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Watch did not return")
		}
	}
	t.Cleanup(stop)
	return svc, stop
}

// runner plays the gateway's job runner: it reads announcements and
// cancels from JOB_EVENTS and publishes reports.
type runner struct {
	t  *testing.T
	js jetstream.JetStream
	c  jetstream.Consumer
}

func newRunner(t *testing.T, g *gateway) *runner {
	c, err := g.JS.OrderedConsumer(context.Background(), backgroundjobs.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{backgroundjobs.PrefixStart + ".>", backgroundjobs.PrefixCancel + ".>"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &runner{t: t, js: g.JS, c: c}
}

func (r *runner) next() jetstream.Msg {
	r.t.Helper()
	m, err := r.c.Next(jetstream.FetchMaxWait(15 * time.Second))
	if err != nil {
		r.t.Fatalf("the runner got nothing: %v", err)
	}
	return m
}

func (r *runner) report(agent, jobID string, seq int, body string) {
	r.t.Helper()
	m := nats.NewMsg(backgroundjobs.Subject(backgroundjobs.PrefixReport, agent, jobID))
	m.Data = []byte(body)
	m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s.report.%d", jobID, seq))
	if _, err := r.js.PublishMsg(context.Background(), m); err != nil {
		r.t.Fatal(err)
	}
}

// waitFor polls a job record until cond holds.
func waitFor(t *testing.T, svc *backgroundjobs.Service, agent, jobID string, cond func(*backgroundjobs.Job) bool) *backgroundjobs.Job {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		j, err := svc.Get(context.Background(), agent, jobID)
		if err == nil && cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never reached the state wanted; last %+v (%v)", jobID, j, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startedID(t *testing.T, o output) string {
	t.Helper()
	var d struct {
		JobID string `json:"job_id"`
	}
	if o.Status != "ok" || json.Unmarshal(o.Details, &d) != nil || d.JobID == "" {
		t.Fatalf("start_job: %s", o.Raw)
	}
	return d.JobID
}

// TestJobStartedAndCancelled: start on worker A → the runner sees the
// announcement and reports progress → worker B shows it → cancel_job →
// the runner gets the cancel, and what it reports afterwards is ignored.
func TestJobStartedAndCancelled(t *testing.T) {
	s := natstest.Start(t)
	g := newGateway(t, s)
	svcA, stopA := jobsWorker(t, s, "A", backgroundjobs.Config{})
	r := newRunner(t, g)
	outs := g.Run("a1", "t1", 0, bound, fc("c1", backgroundjobs.StartName, `{"title":"Research","instructions":"Find three sources on BM25."}`))
	id := startedID(t, outs["c1"])

	m := r.next()
	var start protocol.JobEvent
	if err := json.Unmarshal(m.Data(), &start); err != nil {
		t.Fatal(err)
	}
	if m.Subject() != "job.start.a1."+id || m.Headers().Get(jetstream.MsgIDHeader) != id+".start" ||
		start.Type != "job.start" || start.JobID != id || start.AgentID != "a1" || start.TurnID != "t1" ||
		start.Title != "Research" || start.Instructions != "Find three sources on BM25." {
		t.Fatalf("announcement %s %s %v", m.Subject(), m.Data(), m.Headers())
	}
	r.report("a1", id, 1, `{"status":"running","seq":1,"progress":{"percent":40,"message":"Read 2 of 5 sources"}}`)
	// A applies it before it stops: a report the server sends to A's
	// pull as A drains is delivered again only after the ack wait (30 s),
	// which a loaded host can bring about and is not what this tests.
	waitFor(t, svcA, "a1", id, func(j *backgroundjobs.Job) bool { return j.Status == backgroundjobs.StatusRunning })
	stopA()

	svcB, _ := jobsWorker(t, s, "B", backgroundjobs.Config{})
	waitFor(t, svcB, "a1", id, func(j *backgroundjobs.Job) bool { return j.Status == backgroundjobs.StatusRunning })
	outs = g.Run("a1", "t1", 1, bound, fc("s1", backgroundjobs.ShowName, `{"job_id":"`+id+`"}`), fc("l1", backgroundjobs.ListName, `{}`))
	if got := outs["s1"].Item.Output; !strings.HasPrefix(got, "Job "+id+` "Research": running, 40%: Read 2 of 5 sources`+"\nStarted ") {
		t.Errorf("show_job:\n%s", got)
	}
	if got := outs["l1"].Item.Output; !strings.HasPrefix(got, "1 of 1 job, newest first:\n- "+id+` "Research": running, 40%`) {
		t.Errorf("list_jobs:\n%s", got)
	}

	outs = g.Run("a1", "t1", 2, bound, fc("x1", backgroundjobs.CancelName, `{"job_id":"`+id+`","reason":"No longer needed"}`))
	if got := outs["x1"].Item.Output; !strings.HasPrefix(got, "Cancelled job "+id) {
		t.Fatalf("cancel_job: %s", outs["x1"].Raw)
	}
	m = r.next()
	var cancel protocol.JobEvent
	if err := json.Unmarshal(m.Data(), &cancel); err != nil {
		t.Fatal(err)
	}
	if m.Subject() != "job.cancel.a1."+id || cancel.Type != "job.cancel" || cancel.JobID != id || cancel.Reason != "No longer needed" {
		t.Fatalf("cancel %s %s", m.Subject(), m.Data())
	}
	// The runner finishes anyway: ignored, the job stays cancelled.
	r.report("a1", id, 2, `{"status":"succeeded","seq":2,"result":"three sources"}`)
	r.report("a1", id, 3, `{"status":"cancelled","seq":3,"error":"stopped"}`)
	time.Sleep(500 * time.Millisecond)
	outs = g.Run("a1", "t1", 3, bound,
		fc("s2", backgroundjobs.ShowName, `{"job_id":"`+id+`"}`),
		fc("x2", backgroundjobs.CancelName, `{"job_id":"`+id+`"}`),
		fc("s3", backgroundjobs.ShowName, `{"job_id":"job_nope"}`),
	)
	if got := outs["s2"].Item.Output; !strings.Contains(got, ": cancelled\n") || !strings.HasSuffix(got, "Cancelled: No longer needed") || strings.Contains(got, "three sources") {
		t.Errorf("show_job after cancel:\n%s", got)
	}
	if got := outs["x2"].Item.Output; !strings.Contains(got, "was already cancelled (No longer needed)") {
		t.Errorf("second cancel: %s", got)
	}
	if o := outs["s3"]; o.Error == nil || o.Error.Kind != "tool_error" || !strings.Contains(o.Item.Output, "You have no job job_nope") {
		t.Errorf("unknown job: %s", o.Raw)
	}
	// The repeated cancel is the same message: the runner sees one.
	if m, err := r.c.Next(jetstream.FetchMaxWait(time.Second)); err == nil {
		t.Errorf("runner got another message: %s %s", m.Subject(), m.Data())
	}
}

// TestJobCompletes: reports in and out of order, a result, and reports
// that can never apply.
func TestJobCompletes(t *testing.T) {
	s := natstest.Start(t)
	g := newGateway(t, s)
	svc, _ := jobsWorker(t, s, "A", backgroundjobs.Config{MaxOpen: 1, MaxResultBytes: 100})
	r := newRunner(t, g)
	outs := g.Run("a1", "t1", 0, bound,
		fc("c1", backgroundjobs.StartName, `{"title":"Summarise","instructions":"Summarise the thread."}`),
		fc("c2", backgroundjobs.StartName, `{"title":"Another","instructions":"More."}`),
	)
	id := startedID(t, outs["c1"])
	if o := outs["c2"]; o.Error == nil || o.Error.Kind != "tool_error" || !strings.Contains(o.Item.Output, "1 jobs that have not ended, the most allowed") {
		t.Errorf("second start over the limit: %s", o.Raw)
	}
	r.next()
	// Garbage first: it is terminated and the watcher goes on.
	r.report("a1", id, 90, `not json`)
	r.report("a1", id, 91, `{"status":"done"}`)
	r.report("a1", "job_unknown", 92, `{"status":"running"}`)
	r.report("a1", id, 5, `{"status":"running","seq":5,"progress":{"percent":80}}`)
	waitFor(t, svc, "a1", id, func(j *backgroundjobs.Job) bool { return j.ReportSeq == 5 })
	r.report("a1", id, 4, `{"status":"running","seq":4,"progress":{"percent":50}}`) // stale
	r.report("a1", id, 6, `{"status":"succeeded","seq":6,"result":"`+strings.Repeat("r", 300)+`"}`)
	j := waitFor(t, svc, "a1", id, func(j *backgroundjobs.Job) bool { return j.Status == backgroundjobs.StatusSucceeded })
	if j.Progress == nil || *j.Progress.Percent != 80 || j.EndedAt == nil || len(j.Result) > 100 || !strings.HasSuffix(j.Result, "[… clipped]") {
		t.Errorf("record %+v", j)
	}
	outs = g.Run("a1", "t1", 1, bound,
		fc("s1", backgroundjobs.ShowName, `{"job_id":"`+id+`"}`),
		fc("x1", backgroundjobs.CancelName, `{"job_id":"`+id+`"}`),
		fc("l1", backgroundjobs.ListName, `{"status":"running"}`),
		fc("c3", backgroundjobs.StartName, `{"title":"Now there is room","instructions":"Go."}`),
	)
	if got := outs["s1"].Item.Output; !strings.Contains(got, ": succeeded\n") || !strings.Contains(got, "\nResult:\nrrrr") {
		t.Errorf("show_job:\n%s", got)
	}
	if o := outs["x1"]; o.Error == nil || !strings.Contains(o.Item.Output, "already succeeded; there is nothing to cancel") {
		t.Errorf("cancel of an ended job: %s", o.Raw)
	}
	if got := outs["l1"].Item.Output; got != "You have no running jobs." {
		t.Errorf("list_jobs running: %s", got)
	}
	startedID(t, outs["c3"])
	// The bad reports were terminated, not left to be redelivered.
	c, err := g.JS.Consumer(context.Background(), backgroundjobs.Stream, backgroundjobs.ConsumerReports)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Info(context.Background())
		if err == nil && info.NumAckPending == 0 && info.NumPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reports still pending: %+v", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCatalog pins when the job tools are present.
func TestCatalog(t *testing.T) {
	s := natstest.Start(t)
	g := newGateway(t, s)
	jobsWorker(t, s, "A", backgroundjobs.Config{})
	golden(t, "catalog.json", g.CategoryCatalog(backgroundjobs.Binding))
}
