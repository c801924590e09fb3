package workflowtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/pause"
	"github.com/agentbull/toolruntime/protocol"
)

// ErrNotFound is returned when a workflow or task record does not exist.
var ErrNotFound = errors.New("not found")

// maxCAS bounds the read-modify-write attempts of one update. Contention
// on one record comes from a handful of writers at most (the task's own
// steps, a cancel), so running out means something is wrong.
const maxCAS = 16

// store reads and writes the WORKFLOWS bucket.
//
// The buckets are bound on first use rather than at construction: the
// worker creates them (bus.Setup) after the categories and task turns it
// serves have been built.
//
// Every read and write goes through retry: each attempt is bounded by its
// own short timeout (a request whose answer is lost as a stream leader
// steps down, or while the client reconnects, must fail in seconds, not
// wait out the minutes a tool call may have left) and transient failures
// are tried again; a create or update retried after a lost answer
// recognises its own write (records carry their workflow's random id and
// times).
type store struct {
	js    jetstream.JetStream
	retry bus.Retry

	mu    sync.Mutex
	wf    jetstream.KeyValue
	state jetstream.KeyValue
}

func (s *store) bucket(ctx context.Context, name string, slot *jetstream.KeyValue) (jetstream.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *slot != nil {
		return *slot, nil
	}
	var kv jetstream.KeyValue
	err := s.retry.Do(ctx, "opening bucket "+name, func(ctx context.Context) (err error) {
		kv, err = s.js.KeyValue(ctx, name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening bucket %s: %w", name, err)
	}
	*slot = s.retry.KV(s.js, kv)
	return *slot, nil
}

// workflows is the WORKFLOWS bucket.
func (s *store) workflows(ctx context.Context) (jetstream.KeyValue, error) {
	return s.bucket(ctx, protocol.BucketWorkflows, &s.wf)
}

// turnState is the TURN_STATE bucket (repair marks).
func (s *store) turnState(ctx context.Context) (jetstream.KeyValue, error) {
	return s.bucket(ctx, protocol.BucketState, &s.state)
}

// versioned is a record that remembers the revision it was read at.
type versioned[T any] interface {
	*T
	revision() uint64
	setRevision(uint64)
}

func get[T any, P versioned[T]](ctx context.Context, kv jetstream.KeyValue, key string) (P, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	p := P(new(T))
	if err := json.Unmarshal(e.Value(), p); err != nil {
		return nil, fmt.Errorf("record %s is unreadable: %w", key, err)
	}
	p.setRevision(e.Revision())
	return p, nil
}

// update is a compare-and-set loop: read the record, let change edit it,
// write it back only if nobody wrote in between, and start again if
// somebody did. change reports whether there is anything to write; an
// error from it ends the loop with the record as read. The returned
// record is what is stored now, with its revision.
//
// from, when not nil, is the record as this worker wrote it last (with
// its revision), taken for the first read: the write that follows a
// create need not read it back.
func update[T any, P versioned[T]](ctx context.Context, kv jetstream.KeyValue, key string, from P, change func(P) (bool, error)) (P, error) {
	for attempt := 1; ; attempt++ {
		var rec P
		var err error
		if from != nil {
			rec = P(new(T))
			*rec = *from // a copy: change edits it
			from = nil
		} else {
			rec, err = get[T, P](ctx, kv, key)
		}
		if err != nil {
			return nil, err
		}
		write, err := change(rec)
		if err != nil || !write {
			return rec, err
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return nil, err
		}
		rev, err := kv.Update(ctx, key, data, rec.revision())
		if err == nil {
			rec.setRevision(rev)
			return rec, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return nil, fmt.Errorf("writing %s: %w", key, err)
		}
		if attempt == maxCAS {
			return nil, fmt.Errorf("writing %s: still conflicting after %d attempts: %w", key, attempt, err)
		}
		// A short random pause lets the other writer's update become
		// visible (reads may be served by a replica that is behind).
		if err := pause.For(ctx, time.Duration(attempt)*(5*time.Millisecond+rand.N(10*time.Millisecond))); err != nil {
			return nil, err
		}
	}
}

// put creates a record and returns its revision.
func put(ctx context.Context, kv jetstream.KeyValue, key string, v any) (uint64, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	rev, err := kv.Create(ctx, key, data)
	if err != nil {
		return 0, fmt.Errorf("creating %s: %w", key, err)
	}
	return rev, nil
}

// workflow reads a workflow record.
func (s *store) workflow(ctx context.Context, id string) (*Workflow, error) {
	kv, err := s.workflows(ctx)
	if err != nil {
		return nil, err
	}
	return get[Workflow](ctx, kv, WorkflowKey(id))
}

// task reads a task record.
func (s *store) task(ctx context.Context, workflowID, taskID string) (*Task, error) {
	kv, err := s.workflows(ctx)
	if err != nil {
		return nil, err
	}
	return get[Task](ctx, kv, TaskKey(workflowID, taskID))
}

// tasks reads every task record of a workflow, in the workflow's order.
func (s *store) tasks(ctx context.Context, wf *Workflow) ([]*Task, error) {
	out := make([]*Task, len(wf.Tasks))
	for i, ref := range wf.Tasks {
		t, err := s.task(ctx, wf.ID, ref.TaskID)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// create stores a new workflow: the task records first, then the
// workflow record, then its index entry, each create-only. A reader that
// finds the workflow record therefore finds all its tasks.
func (s *store) create(ctx context.Context, wf *Workflow, tasks []*Task) error {
	kv, err := s.workflows(ctx)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if t.Revision, err = put(ctx, kv, TaskKey(t.WorkflowID, t.TaskID), t); err != nil {
			return err
		}
	}
	if wf.Revision, err = put(ctx, kv, WorkflowKey(wf.ID), wf); err != nil {
		return err
	}
	_, err = put(ctx, kv, agentKey(wf.AgentID, wf.ID), struct{}{})
	return err
}

// updateWorkflow is update on a workflow record.
func (s *store) updateWorkflow(ctx context.Context, id string, change func(*Workflow) (bool, error)) (*Workflow, error) {
	kv, err := s.workflows(ctx)
	if err != nil {
		return nil, err
	}
	return update(ctx, kv, WorkflowKey(id), nil, change)
}

// updateTask is update on a task record.
func (s *store) updateTask(ctx context.Context, workflowID, taskID string, change func(*Task) (bool, error)) (*Task, error) {
	kv, err := s.workflows(ctx)
	if err != nil {
		return nil, err
	}
	return update(ctx, kv, TaskKey(workflowID, taskID), nil, change)
}

// failTask ends an open task as failed. It returns the record as stored;
// a task that had already ended is returned unchanged.
func (s *store) failTask(ctx context.Context, workflowID, taskID, reason string, by EndedBy, now time.Time) (*Task, error) {
	return s.updateTask(ctx, workflowID, taskID, func(t *Task) (bool, error) {
		if !t.Open() {
			return false, nil
		}
		t.Status, t.Reason, t.EndedBy, t.EndedAt = TaskFailed, reason, &by, &now
		return true, nil
	})
}

// markReady records that a task's task.ready event is stored. t is the
// task as create stored it.
func (s *store) markReady(ctx context.Context, t *Task) error {
	kv, err := s.workflows(ctx)
	if err != nil {
		return err
	}
	_, err = update(ctx, kv, TaskKey(t.WorkflowID, t.TaskID), t, func(t *Task) (bool, error) {
		if t.Status != TaskPending {
			return false, nil
		}
		t.Status = TaskReady
		return true, nil
	})
	return err
}

// agentWorkflows returns the ids of an agent's workflows, newest first
// (ids sort by creation time).
func (s *store) agentWorkflows(ctx context.Context, agentID string) ([]string, error) {
	kv, err := s.workflows(ctx)
	if err != nil {
		return nil, err
	}
	prefix := "agent." + agentID + "."
	var ids []string
	err = s.retry.Watch(ctx, "listing workflows", func(ctx context.Context) (jetstream.KeyWatcher, error) {
		ids = ids[:0] // an attempt lists from the start
		return kv.Watch(ctx, prefix+"*", jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	}, func(e jetstream.KeyValueEntry) error {
		ids = append(ids, strings.TrimPrefix(e.Key(), prefix))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing workflows: %w", err)
	}
	// A watch may report a key twice while the bucket is written to.
	slices.Sort(ids)
	ids = slices.Compact(ids)
	slices.Reverse(ids)
	return ids, nil
}
