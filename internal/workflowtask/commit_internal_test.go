package workflowtask

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

const wait = 10 * time.Second

type nopEvents struct{}

func (nopEvents) Event(context.Context, string, string, any) error { return nil }

// TestConcurrentCommits has many submissions of one task's turn race on
// separate services (as on separate workers), straight at the
// compare-and-set: exactly one commits, every other one is told the task
// was already accepted, and the record holds the winner's value.
func TestConcurrentCommits(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx := context.Background()
	js := srv.JetStream(t)
	if err := bus.Setup(ctx, js, bus.Topology{}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`)
	for round := range 5 {
		s := New(js, Config{Events: nopEvents{}})
		now := time.Now().UTC()
		wf := &Workflow{ID: newWorkflowID(now), AgentID: "a", TurnID: "main", Status: WorkflowRunning, CreatedAt: now}
		task := &Task{WorkflowID: wf.ID, TaskID: "t", AgentID: "a", TurnID: TaskTurnID(wf.ID, "t"), ResultSchema: schema, Status: TaskReady, CreatedAt: now}
		wf.Tasks = []protocol.WorkflowTask{{TaskID: "t", TurnID: task.TurnID, Status: TaskReady}}
		if err := s.store.create(ctx, wf, []*Task{task}); err != nil {
			t.Fatal(err)
		}

		kv, err := js.KeyValue(ctx, protocol.BucketWorkflows)
		if err != nil {
			t.Fatal(err)
		}
		watch, err := kv.Watch(ctx, TaskKey(wf.ID, "t"), jetstream.UpdatesOnly())
		if err != nil {
			t.Fatal(err)
		}

		const n = 8
		var committed atomic.Int64
		var winner atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			other := New(srv.JetStream(t), Config{Events: nopEvents{}})
			wg.Go(func() {
				cctx := tools.WithCall(ctx, tool.Call{AgentID: "a", TurnID: task.TurnID, Step: int64(i), CallID: fmt.Sprintf("c%d", i)})
				<-start
				res, err := other.commit(cctx, wf.ID, "t", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
				if err != nil {
					t.Errorf("round %d call %d: %v", round, i, err)
					return
				}
				if res.Details.(submitDetails).Committed {
					committed.Add(1)
					winner.Store(int64(i))
				} else if !res.EndTurn {
					t.Errorf("round %d call %d: a losing submission should end the turn too: %+v", round, i, res)
				}
			})
		}
		close(start)
		wg.Wait()
		if committed.Load() != 1 {
			t.Fatalf("round %d: %d commits", round, committed.Load())
		}
		select {
		case e := <-watch.Updates():
			if e == nil || !json.Valid(e.Value()) {
				t.Fatalf("round %d: watch %v", round, e)
			}
		case <-time.After(wait):
			t.Fatalf("round %d: the commit was not seen", round)
		}
		rec, err := s.store.task(ctx, wf.ID, "t")
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"n":%d}`, winner.Load()); string(rec.Result) != want || rec.EndedBy.CallID != fmt.Sprintf("c%d", winner.Load()) {
			t.Errorf("round %d: stored %s by %+v, want %s", round, rec.Result, rec.EndedBy, want)
		}
		// Nothing else was written to the record: one update in all.
		select {
		case e := <-watch.Updates():
			t.Errorf("round %d: a second write: %s", round, e.Value())
		case <-time.After(200 * time.Millisecond):
		}
		_ = watch.Stop()
	}
}
