package mcpdoor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/pause"
	"github.com/agentbull/toolruntime/protocol"
)

// ExtTasks is the MCP tasks extension (SEP-2663): a client that declares
// it gets a task handle for a call that runs past Config.TaskAfter (or
// is held for a person's approval) and polls it with tasks/get.
const ExtTasks = "io.modelcontextprotocol/tasks"

// A task is a call's step, durable in JetStream, and nothing else: its id
// is sealed (AES-256-GCM, the replicas' shared key) and names the
// principal, the step and the call, so any replica opens it and reads the
// call's state from the turn's streams (TURN_OUTPUTS for the output and a
// step.pending, TURN_APPROVALS for a decision, TURN_DEAD for a step the
// workers gave up on). No replica keeps a record of it.

// taskPurpose is the additional data of task ids: a requestState or a
// session id never opens as one, nor the reverse.
var taskPurpose = []byte("toolruntime mcp door task v1")

// taskState is what a task id holds.
type taskState struct {
	V         int    `json:"v"`
	Principal string `json:"p"`
	Agent     string `json:"a"`
	Turn      string `json:"t"`
	Step      int64  `json:"s"`
	CallID    string `json:"c"`
	Tool      string `json:"n"`
	Named     bool   `json:"nm,omitempty"`
	Created   int64  `json:"cr"` // unix milliseconds
	Expires   int64  `json:"e"`  // unix milliseconds
}

var errTaskNotFound = errors.New("task not found")

func (s *sealer) sealTask(st taskState) string {
	b, _ := json.Marshal(st)
	return s.sealBytes(b, taskPurpose)
}

// openTask reads a task id back for principal p: anything forged, cut,
// expired or another principal's is errTaskNotFound, told apart from
// nothing else, so that a client learns nothing of others' tasks.
func (s *sealer) openTask(text string, p *Principal, now time.Time) (taskState, error) {
	var st taskState
	plain, ok := s.openBytes(text, taskPurpose)
	if !ok || json.Unmarshal(plain, &st) != nil || st.V != 1 {
		return taskState{}, errTaskNotFound
	}
	if p == nil || st.Principal != p.Name || st.Agent != p.AgentID || now.UnixMilli() >= st.Expires ||
		!protocol.ValidID(st.Agent) || !protocol.ValidID(st.Turn) || st.Step < 0 {
		return taskState{}, errTaskNotFound
	}
	return st, nil
}

// clientHasTasks reports whether the request's client declared the tasks
// extension (in the request's _meta, or at initialize).
func clientHasTasks(caps *mcp.ClientCapabilities) bool {
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[ExtTasks]
	return ok
}

// capsOf is a request's client capabilities, for any request type.
func capsOf(req mcp.Request) *mcp.ClientCapabilities {
	if r, ok := req.(interface {
		ClientCapabilities() *mcp.ClientCapabilities
	}); ok {
		return r.ClientCapabilities()
	}
	return nil
}

// missingTasks is the -32021 error of SEP-2575 for a client that did not
// declare the tasks extension.
func missingTasks(what string) error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtTasks: map[string]any{}}}})
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
		Message: what + " needs the " + ExtTasks + " extension, which the client did not declare", Data: data}
}

// Task statuses (SEP-2663).
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// taskEnvelope is the Task of SEP-2663: the fields of a CreateTaskResult
// and of a tasks/get answer.
type taskEnvelope struct {
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          int64  `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
}

// createTaskResult answers a tools/call that became a task.
type createTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	taskEnvelope
}

// detailedTask answers tasks/get: the task, with the call's result once
// completed, its error once failed, its input requests while it waits
// for them.
type detailedTask struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	taskEnvelope
	Result        *mcp.CallToolResult `json:"result,omitempty"`
	Error         *jsonrpc.Error      `json:"error,omitempty"`
	InputRequests mcp.InputRequestMap `json:"inputRequests,omitempty"`
}

// ackResult answers tasks/update and tasks/cancel: SEP-2663's empty ack.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

func isoMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// taskBox carries, in a tools/call's context, the task its handler made
// of the call: the SDK's tool handlers answer a CallToolResult, which
// cannot say resultType "task", so a middleware answers the box instead.
type taskBox struct{ res *createTaskResult }

type taskBoxKey struct{}

// taskMiddleware answers a tools/call whose handler made a task with the
// CreateTaskResult.
func taskMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		box := &taskBox{}
		res, err := next(context.WithValue(ctx, taskBoxKey{}, box), method, req)
		if err == nil && box.res != nil {
			return box.res, nil
		}
		return res, err
	}
}

// taskPlan is how a call of a client that declared the extension becomes a
// task: when it runs past at, or is held for approval.
type taskPlan struct {
	at  time.Time
	box *taskBox
}

// toTask hands the call to a task: the step goes on in the fleet, and
// the client gets its handle.
func (c *callRun) toTask(status string) *mcp.CallToolResult {
	now := time.Now()
	st := taskState{V: 1, Principal: c.p.Name, Agent: c.p.AgentID, Turn: c.turn, Step: c.step, CallID: c.callID, Tool: c.toolName,
		Named: c.named, Created: now.UnixMilli(), Expires: now.Add(c.d.cfg.TaskTTL).UnixMilli()}
	id := c.d.seal.sealTask(st)
	c.plan.box.res = &createTaskResult{ResultType: "task", taskEnvelope: c.d.envelope(id, st, status, now.UnixMilli())}
	return &mcp.CallToolResult{Content: []mcp.Content{}}
}

func (d *Door) envelope(id string, st taskState, status string, updated int64) taskEnvelope {
	return taskEnvelope{TaskID: id, Status: status, CreatedAt: isoMillis(st.Created), LastUpdatedAt: isoMillis(max(updated, st.Created)),
		TTLMs: max(1, st.Expires-st.Created), PollIntervalMs: max(1, d.cfg.TaskPollInterval.Milliseconds())}
}

// taskRequired reports whether a tool runs only as a task.
func (d *Door) taskRequired(tool string) bool { return slices.Contains(d.cfg.TaskRequired, tool) }

// addTaskMethods serves the tasks extension on a principal's server.
// tasks/result and tasks/list, removed by SEP-2663, stay unknown methods.
func (d *Door) addTaskMethods(srv *mcp.Server, p *Principal) {
	srv.AddReceivingMiddleware(taskMiddleware, func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if (method == "tasks/get" || method == "tasks/update" || method == "tasks/cancel") && !clientHasTasks(capsOf(req)) {
				return nil, missingTasks(method)
			}
			return next(ctx, method, req)
		}
	})
	_ = mcp.AddReceivingCustomMethod(srv, "tasks/get", func(ctx context.Context, _ *mcp.ServerSession, params *taskParams) (*detailedTask, error) {
		return d.taskGet(ctx, p, params)
	})
	_ = mcp.AddReceivingCustomMethod(srv, "tasks/update", func(ctx context.Context, _ *mcp.ServerSession, params *taskParams) (*ackResult, error) {
		return d.taskUpdate(ctx, p, params)
	})
	_ = mcp.AddReceivingCustomMethod(srv, "tasks/cancel", func(ctx context.Context, _ *mcp.ServerSession, params *taskParams) (*ackResult, error) {
		return d.taskCancel(ctx, p, params)
	})
}

func (d *Door) openTaskParams(p *Principal, params *taskParams) (taskState, string, error) {
	if params == nil || params.TaskID == "" {
		return taskState{}, "", invalidParams(errors.New("taskId is required"))
	}
	st, err := d.seal.openTask(params.TaskID, p, time.Now())
	if err != nil {
		return taskState{}, "", invalidParams(err)
	}
	return st, params.TaskID, nil
}

func (d *Door) taskGet(ctx context.Context, p *Principal, params *taskParams) (*detailedTask, error) {
	st, id, err := d.openTaskParams(p, params)
	if err != nil {
		return nil, err
	}
	v, err := d.viewTask(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("reading the task's step: %w", err)
	}
	res := &detailedTask{ResultType: "complete", taskEnvelope: d.envelope(id, st, v.status, v.updated)}
	switch v.status {
	case taskCompleted:
		res.Result = v.result
	case taskFailed:
		res.Error = v.err
		res.StatusMessage = v.err.Message
	case taskCancelled:
		res.StatusMessage = "cancelled"
	case taskInputRequired:
		res.InputRequests = mcp.InputRequestMap{approvalKey: approvalForm(st.Tool, st.CallID, v.pending)}
		res.StatusMessage = "waiting for a person's approval"
	}
	return res, nil
}

// taskUpdate takes a client's answer to a held call's approval (the
// input request "approval"); other keys are ignored. The first decision
// of a step wins, so a second answer decides nothing new.
func (d *Door) taskUpdate(ctx context.Context, p *Principal, params *taskParams) (*ackResult, error) {
	st, _, err := d.openTaskParams(p, params)
	if err != nil {
		return nil, err
	}
	raw, ok := params.InputResponses[approvalKey]
	if !ok {
		return &ackResult{ResultType: "complete"}, nil
	}
	var r mcp.ElicitResult
	if err := json.Unmarshal(raw, &r); err != nil || r.Action == "" {
		return nil, invalidParams(errors.New(`inputResponses["approval"] must be an elicitation result {action, content}`))
	}
	if err := d.gw.Decide(ctx, p.AgentID, st.Turn, st.Step, 1, []protocol.Decision{decisionOf(st.CallID, &r)}); err != nil {
		return nil, fmt.Errorf("sending the decision: %w", err)
	}
	return &ackResult{ResultType: "complete"}, nil
}

// taskCancel cancels the task's call on the workers, as a closed request
// does (callRun.cancel): its fresh turn, or its step alone in a named
// turn. Cancelling a task that ended changes nothing and is acked alike.
func (d *Door) taskCancel(ctx context.Context, p *Principal, params *taskParams) (*ackResult, error) {
	st, _, err := d.openTaskParams(p, params)
	if err != nil {
		return nil, err
	}
	const reason = "cancelled by the MCP client (tasks/cancel)"
	if !st.Named {
		if err := d.gw.Cancel(ctx, p.AgentID, st.Turn, reason); err != nil {
			return nil, fmt.Errorf("cancelling: %w", err)
		}
		return &ackResult{ResultType: "complete"}, nil
	}
	if err := d.cancelStep(st, reason); err != nil {
		return nil, fmt.Errorf("cancelling: %w", err)
	}
	// A step still waiting for its share is not running yet, and a step
	// cancel is not remembered: send it again until the call's output
	// comes, as callRun.cancel does; one such loop per step on a replica,
	// however often the client cancels.
	key := st.Agent + "." + st.Turn + "." + strconv.FormatInt(st.Step, 10)
	if _, running := d.cancelLoops.LoadOrStore(key, true); running {
		return &ackResult{ResultType: "complete"}, nil
	}
	go func() {
		defer d.cancelLoops.Delete(key)
		ctx, stop := context.WithTimeout(context.Background(), stepCancelFor)
		defer stop()
		for ctx.Err() == nil {
			if err := pause.For(ctx, time.Second); err != nil {
				return
			}
			if v, err := d.viewTask(ctx, st); err == nil && v.status != taskWorking && v.status != taskInputRequired {
				return
			}
			_ = d.cancelStep(st, reason)
		}
	}()
	return &ackResult{ResultType: "complete"}, nil
}

func (d *Door) cancelStep(st taskState, reason string) error {
	body, _ := json.Marshal(protocol.CancelStep{Step: st.Step, Reason: reason})
	return d.cfg.NC.Publish(protocol.PrefixCancelStep+"."+st.Agent+"."+st.Turn, body)
}

// taskView is a task's state as the turn's streams tell it.
type taskView struct {
	status  string
	updated int64 // unix milliseconds of the last event read
	result  *mcp.CallToolResult
	err     *jsonrpc.Error
	pending *protocol.StepPending
}

// maxTaskEvents bounds the events of a turn one tasks/get reads.
const maxTaskEvents = 10000

// taskClockMargin is how much earlier than a task's creation, less
// TaskAfter, its step's events are read from.
const taskClockMargin = 5 * time.Minute

// viewTask reads the call's state: its call.output (completed, failed for
// an error of the worker, cancelled for an aborted call), a dead letter of
// its step (failed), a step.pending holding it without a decision
// (input_required), else working.
func (d *Door) viewTask(ctx context.Context, st taskState) (taskView, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v := taskView{status: taskWorking, updated: st.Created}
	outputs, err := d.js.Stream(ctx, protocol.StreamOutputs)
	if err != nil {
		return v, err
	}
	subject := protocol.Subject(protocol.PrefixOutput, st.Agent, st.Turn)
	last, err := outputs.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		last = nil
	case err != nil:
		return v, err
	}
	// The step's events all come after its publish, which was before
	// the task was made (by at most TaskAfter, or the wait of a held
	// call's retry); the margin covers the clocks of door and server.
	from := time.UnixMilli(st.Created).Add(-d.cfg.TaskAfter - taskClockMargin)
	if last != nil && !last.Time.Before(from) {
		cons, err := outputs.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, InactiveThreshold: 5 * time.Second,
			DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &from})
		if err != nil {
			return v, err
		}
		for range maxTaskEvents {
			m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				return v, err
			}
			meta, err := m.Metadata()
			if err != nil {
				return v, err
			}
			if done := d.applyEvent(&v, st, m.Subject(), m.Data(), meta.Timestamp); done {
				return v, nil
			}
			if meta.Sequence.Stream >= last.Sequence {
				break
			}
		}
	}
	if dead, t := d.deadStep(ctx, st); dead != "" {
		v.status, v.pending, v.updated = taskFailed, nil, max(v.updated, t.UnixMilli())
		v.err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the workers gave up on the call's step: " + dead}
		return v, nil
	}
	if v.pending != nil {
		if d.decided(ctx, st) {
			v.pending = nil
		} else {
			v.status = taskInputRequired
		}
	}
	return v, nil
}

// applyEvent folds one event of the turn into v; true when the call ended.
func (d *Door) applyEvent(v *taskView, st taskState, subject string, data []byte, at time.Time) bool {
	ev, err := gateway.DecodeEvent(subject, data)
	if err != nil {
		return false
	}
	switch ev := ev.(type) {
	case *protocol.CallOutput:
		if ev.Step != st.Step || ev.CallID != st.CallID {
			return false
		}
		v.updated, v.pending = max(v.updated, at.UnixMilli()), nil
		switch {
		case ev.Error != nil && ev.Error.Kind == protocol.Aborted:
			v.status = taskCancelled
		case ev.Error != nil && ev.Error.Kind == protocol.Internal:
			v.status = taskFailed
			v.err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: ev.Error.Message}
		default:
			v.status, v.result = taskCompleted, toResult(ev)
		}
		return true
	case *protocol.StepPending:
		if ev.Step != st.Step {
			return false
		}
		for _, a := range ev.Approvals {
			if a.CallID == st.CallID {
				v.pending, v.updated = ev, max(v.updated, at.UnixMilli())
			}
		}
	}
	return false
}

// decided reports whether the step's approval was answered: a decision
// of this step is on the turn's subject of TURN_APPROVALS.
func (d *Door) decided(ctx context.Context, st taskState) bool {
	s, err := d.js.Stream(ctx, protocol.StreamApprovals)
	if err != nil {
		return false
	}
	m, err := s.GetLastMsgForSubject(ctx, protocol.Subject(protocol.PrefixApproval, st.Agent, st.Turn))
	if err != nil {
		return false
	}
	var head struct {
		Step int64 `json:"step"`
	}
	return json.Unmarshal(m.Data, &head) == nil && head.Step == st.Step
}

// deadStep is the reason the workers dead-lettered the task's step, if
// they did.
func (d *Door) deadStep(ctx context.Context, st taskState) (string, time.Time) {
	s, err := d.js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		return "", time.Time{}
	}
	m, err := s.GetLastMsgForSubject(ctx, protocol.Subject(protocol.PrefixDead, st.Agent, st.Turn))
	if err != nil {
		return "", time.Time{}
	}
	var head struct {
		Step *int64 `json:"step"`
	}
	if json.Unmarshal(m.Data, &head) != nil || head.Step == nil || *head.Step != st.Step {
		return "", time.Time{}
	}
	reason := m.Header.Get("Dead-Reason")
	if reason == "" {
		reason = "dead-lettered"
	}
	return reason, m.Time
}

// taskHeaders checks a 2026-07-28 tasks/* request's Mcp-Name header, when
// it has one, against its params.taskId (SEP-2663 routing headers); the
// SDK checks Mcp-Name only for tools, resources and prompts.
func (d *Door) taskHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := r.Header.Get("Mcp-Method")
		name, has := r.Header.Values("Mcp-Name"), len(r.Header.Values("Mcp-Name")) > 0
		if !has || (m != "tasks/get" && m != "tasks/update" && m != "tasks/cancel") {
			next.ServeHTTP(w, r)
			return
		}
		body := readBody(r, d.cfg.MaxBodyBytes)
		if body.readErr != nil {
			writeRPCError(w, http.StatusBadRequest, -32700, "reading the body: "+body.readErr.Error())
			return
		}
		// A body wire refuses, or of another method (the SDK refuses
		// that on Mcp-Method), or whose taskId is not a string, is theirs
		// to answer.
		if body.over {
			next.ServeHTTP(w, r)
			return
		}
		info, err := body.check()
		if err == nil && info.method == m && len(info.id) > 0 && info.taskIDKind != taskIDOther && strings.TrimSpace(name[0]) != info.taskID {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": info.id,
				"error": map[string]any{"code": mcp.CodeHeaderMismatch, "message": "header mismatch: Mcp-Name does not match params.taskId"}})
			_, _ = w.Write(b)
			return
		}
		next.ServeHTTP(w, r)
	})
}
