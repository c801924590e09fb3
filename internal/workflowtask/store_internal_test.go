package workflowtask

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// behind is the real WORKFLOWS bucket read through a replica that does
// not have the latest writes yet: its next misses reads find nothing.
type behind struct {
	jetstream.KeyValue
	misses atomic.Int64
}

func (b *behind) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if b.misses.Add(-1) >= 0 {
		return nil, jetstream.ErrKeyNotFound
	}
	return b.KeyValue.Get(ctx, key)
}

// TestMarkReadyReadBehind: marking the tasks of a workflow just created
// ready does not depend on reading them back, and a task another writer
// changed meanwhile, which a read then misses, is read from the leader:
// in a cluster any replica answers a read, and one may not have the
// record yet (start_workflow failed as "stored but could not be
// announced").
func TestMarkReadyReadBehind(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx := context.Background()
	js := srv.JetStream(t)
	if err := bus.Setup(ctx, js, bus.Topology{}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	real, err := js.KeyValue(ctx, protocol.BucketWorkflows)
	if err != nil {
		t.Fatal(err)
	}
	s := New(js, Config{Events: nopEvents{}})
	b := &behind{KeyValue: real}
	s.store.wf = bus.Retry{}.KV(js, b)
	now := time.Now().UTC()
	wf := &Workflow{ID: newWorkflowID(now), AgentID: "a", TurnID: "main", Status: WorkflowRunning, CreatedAt: now}
	var tasks []*Task
	for _, id := range []string{"k0", "k1"} {
		task := &Task{WorkflowID: wf.ID, TaskID: id, AgentID: "a", TurnID: TaskTurnID(wf.ID, id), ResultSchema: json.RawMessage(`{"type":"object"}`), Status: TaskPending, CreatedAt: now}
		tasks = append(tasks, task)
		wf.Tasks = append(wf.Tasks, protocol.WorkflowTask{TaskID: id, TurnID: task.TurnID, Status: TaskReady})
	}
	if err := s.store.create(ctx, wf, tasks); err != nil {
		t.Fatal(err)
	}
	status := func(id string) string {
		t.Helper()
		e, err := real.Get(ctx, TaskKey(wf.ID, id))
		if err != nil {
			t.Fatal(err)
		}
		var rec Task
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			t.Fatal(err)
		}
		return rec.Status
	}

	b.misses.Store(1 << 30) // no read finds anything
	if err := s.store.markReady(ctx, tasks[0]); err != nil {
		t.Fatalf("marking a task just created ready: %v", err)
	}
	if got := status("k0"); got != TaskReady {
		t.Fatalf("k0 is %s, want %s", got, TaskReady)
	}

	// Another writer ends k1 first; the write conflicts, and the first
	// read after it misses.
	failed := *tasks[1]
	failed.Status, failed.Reason = TaskFailed, ReasonWorkflowCancelled
	data, _ := json.Marshal(&failed)
	if _, err := real.Update(ctx, TaskKey(wf.ID, "k1"), data, tasks[1].Revision); err != nil {
		t.Fatal(err)
	}
	b.misses.Store(1)
	if err := s.store.markReady(ctx, tasks[1]); err != nil {
		t.Fatalf("marking a task another writer changed: %v", err)
	}
	if got := status("k1"); got != TaskFailed {
		t.Fatalf("k1 is %s, want it left %s", got, TaskFailed)
	}
	if tasks[0].Status != TaskPending {
		t.Fatalf("markReady changed the caller's record: %s", tasks[0].Status)
	}
}
