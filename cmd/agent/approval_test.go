package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// approvalWorker runs a real worker that holds every call of mark (which
// appends its label to a file in the returned directory) for approval,
// for at most timeout (0: the worker's default).
func approvalWorker(t *testing.T, srv *natstest.Server, timeout time.Duration) (markDir string) {
	t.Helper()
	markDir = t.TempDir()
	cfg := workertest.Config("w1")
	cfg.Approval = turn.Policy{Names: []string{"mark"}, Timeout: timeout}
	workertest.RunWorkerWith(t, srv, cfg, func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{diagnostics.Category(diagnostics.Config{MarkDir: markDir})}, nil
	})
	return markDir
}

// approvalAgent is an agent on the model, and on a worker of its own that
// holds mark for approval (for at most timeout; 0: the default);
// markDir is where the worker's marks go.
func approvalAgent(t *testing.T, model *fakeModel, timeout time.Duration) (a *Agent, markDir string) {
	t.Helper()
	srv := natstest.Start(t)
	markDir = approvalWorker(t, srv, timeout)
	gw, err := gateway.New(srv.Connect(t), gateway.Options{Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	return &Agent{GW: gw, ModelName: "fake", MaxSteps: 10, Log: workertest.Logger(),
		Model: openai.NewClient(option.WithBaseURL(model.srv.URL+"/v1/"), option.WithAPIKey("test-key"), option.WithMaxRetries(0))}, markDir
}

func marks(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "marks.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

var approvalCtx = protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{diagnostics.Binding: true}}

// Each --approve mode answers the real step.pending of a step with two
// held calls and one that needs none: the approved calls run, the
// refused are rejected with the operator's reason, the step ends, and the
// model's next request carries the step's outputs as the bytes the
// worker sent, after the model's own items.
func TestApproveModesAnswerARealPendingStep(t *testing.T) {
	t.Parallel()
	const first = "Mark two things."
	out0 := []string{call("c1", "mark", `{"label":"one"}`), call("c2", "ping", `{"note":"p"}`), call("c3", "mark", `{"label":"two",}`)}
	for _, c := range []struct {
		mode, input string
		ran         []string
		refused     []string
	}{
		{"ask", "y\nn\n", []string{"one"}, []string{"c3"}},
		{"all", "", []string{"one", "two"}, nil},
		{"none", "", nil, []string{"c1", "c3"}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			model := newFakeModel(t, &script{first: first, outputs: [][]string{out0, {say("Done.")}}})
			a, dir := approvalAgent(t, model, 0)
			var asked bytes.Buffer
			approve := approver(c.mode, strings.NewReader(c.input), &asked)
			var mu sync.Mutex
			var pend []*protocol.StepPending
			var dones []*protocol.StepDone
			outs := map[string]*protocol.CallOutput{}
			a.Approve = func(ctx context.Context, call protocol.PendingCall) protocol.Decision {
				d := approve(ctx, call)
				d.CallID = "forged" // the agent answers for the call it asked about, whatever Approve says
				return d
			}
			a.OnEvent = func(_ string, ev protocol.Event) {
				mu.Lock()
				defer mu.Unlock()
				switch ev := ev.(type) {
				case *protocol.StepPending:
					// Nothing of the held step ran before its step.pending.
					if len(outs) != 0 || len(marks(t, dir)) != 0 {
						t.Errorf("outputs %v and marks %v before the step.pending", outs, marks(t, dir))
					}
					pend = append(pend, ev)
				case *protocol.CallOutput:
					outs[ev.CallID] = ev
				case *protocol.StepDone:
					dones = append(dones, ev)
				}
			}
			res, err := a.RunTurn(ctxT(t), Turn{AgentID: "a1", TurnID: "t1", Context: approvalCtx, Message: first})
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "Done." || res.Steps != 2 || res.Cancelled {
				t.Fatalf("result %+v", res)
			}
			if len(pend) != 1 || len(pend[0].Approvals) != 2 || pend[0].Approvals[0].CallID != "c1" || pend[0].Approvals[1].CallID != "c3" ||
				string(pend[0].Approvals[1].Arguments) != `{"label":"two"}` {
				t.Fatalf("step.pending %+v", pend)
			}
			if c.mode == "ask" && asked.String() != `approve mark {"label":"one"} (named)? [y/N] approve mark {"label":"two"} (named)? [y/N] ` {
				t.Fatalf("asked %q", asked.String())
			}
			if m := marks(t, dir); !slices.Equal(m, c.ran) {
				t.Fatalf("marks %v, want %v", m, c.ran)
			}
			for _, id := range c.refused {
				if e := outs[id].Error; e == nil || e.Kind != protocol.Rejected || !strings.Contains(string(outs[id].Item), "operator") {
					t.Fatalf("%s %+v %s, want rejected with the operator's reason", id, outs[id], outs[id].Item)
				}
			}
			if outs["c2"].Status != protocol.StatusOK {
				t.Fatalf("c2 %+v", outs["c2"])
			}
			reqs := model.requests(first)
			if len(reqs) != 2 || len(dones) != 2 || len(dones[0].Items) != 3 {
				t.Fatalf("%d requests, step.done %+v", len(reqs), dones)
			}
			// The user message, the model's three items, the step's three
			// outputs, byte for byte.
			in := inputItems(t, reqs[1])
			want := append(slices.Clone(out0), string(dones[0].Items[0]), string(dones[0].Items[1]), string(dones[0].Items[2]))
			if len(in) != 1+len(want) {
				t.Fatalf("second request's input has %d items: %s", len(in), requestField(t, reqs[1], "input"))
			}
			for i, w := range want {
				if string(in[i+1]) != w {
					t.Errorf("input[%d] is\n%s\nwant\n%s", i+1, in[i+1], w)
				}
			}
			for i, id := range []string{"c1", "c2", "c3"} {
				if string(dones[0].Items[i]) != string(outs[id].Item) {
					t.Errorf("step.done items[%d] is not %s's output", i, id)
				}
			}
		})
	}
}

// The command line with --approve none: the held call is refused, the
// turn completes, and -v shows the wait and the rejection.
func TestCommandLineApproveNone(t *testing.T) {
	const first = "Mark it."
	model := newFakeModel(t, &script{first: first, outputs: [][]string{{call("c1", "mark", `{"label":"x"}`)}, {say("Refused, then.")}}})
	srv := natstest.Start(t)
	dir := approvalWorker(t, srv, 0)
	t.Setenv("OPENAI_BASE_URL", model.srv.URL+"/v1/")
	t.Setenv("OPENAI_API_KEY", "test-key")
	var stdout, stderr bytes.Buffer
	err := run(ctxT(t), []string{"--nats-url", srv.ClientURL(), "--model", "fake", "--bind", "diagnostics", "--agent", "a1", "--turn", "t1", "--approve", "none", "-v", first}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if stdout.String() != "Refused, then.\n" {
		t.Fatalf("stdout %q", stdout.String())
	}
	for _, want := range []string{`step 0 waits for approval: c1 mark {"label":"x"} (named)`, "c1 mark → rejected", "step 1 done, end_turn true"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr has no %q:\n%s", want, stderr.String())
		}
	}
	if m := marks(t, dir); len(m) != 0 {
		t.Fatalf("marks %v", m)
	}
}

// Without an Approve the step waits for an answer from elsewhere; here
// nobody answers, and at the worker's short timeout the held call is
// rejected "approval timed out", which the model then reads.
func TestUnansweredPendingStepTimesOut(t *testing.T) {
	t.Parallel()
	const first = "Mark it later."
	model := newFakeModel(t, &script{first: first, outputs: [][]string{{call("c1", "mark", `{"label":"late"}`)}, {say("Nobody approved.")}}})
	a, dir := approvalAgent(t, model, time.Second)
	res, err := a.RunTurn(ctxT(t), Turn{AgentID: "a1", TurnID: "t1", Context: approvalCtx, Message: first})
	if err != nil || res.Text != "Nobody approved." || res.Steps != 2 {
		t.Fatalf("result %+v, %v", res, err)
	}
	reqs := model.requests(first)
	in := inputItems(t, reqs[1])
	var item struct {
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
	if err := json.Unmarshal(in[len(in)-1], &item); err != nil || item.CallID != "c1" || !strings.Contains(item.Output, "approval timed out") {
		t.Fatalf("the model read %s", in[len(in)-1])
	}
	if m := marks(t, dir); len(m) != 0 {
		t.Fatalf("marks %v", m)
	}
}

// Stopping the turn while its step waits for an answer cancels it on the
// workers: the held call is aborted, the step still ends, and the model
// is not called again.
func TestCancelWhilePending(t *testing.T) {
	t.Parallel()
	const first = "Mark it, or not."
	model := newFakeModel(t, &script{first: first, outputs: [][]string{{call("c1", "mark", `{"label":"x"}`)}, {say("never")}}})
	a, dir := approvalAgent(t, model, 0)
	ctx, cancel := context.WithCancel(ctxT(t))
	var out *protocol.CallOutput
	a.OnEvent = func(_ string, ev protocol.Event) {
		switch ev := ev.(type) {
		case *protocol.StepPending:
			cancel()
		case *protocol.CallOutput:
			out = ev
		}
	}
	res, err := a.RunTurn(ctx, Turn{AgentID: "a1", TurnID: "t1", Context: approvalCtx, Message: first})
	if err != nil || !res.Cancelled || res.Steps != 1 {
		t.Fatalf("result %+v, %v", res, err)
	}
	if out == nil || out.Error == nil || out.Error.Kind != protocol.Aborted {
		t.Fatalf("the held call's output %+v", out)
	}
	if n := len(model.requests(first)); n != 1 {
		t.Fatalf("the model was called %d times after the cancel", n-1)
	}
	if m := marks(t, dir); len(m) != 0 {
		t.Fatalf("marks %v", m)
	}
}

// Ctrl-C while the terminal asks about a held call: the question is given
// up, the turn is cancelled on the workers (the held call aborted), and
// the step still ends.
func TestStopWhileAsking(t *testing.T) {
	t.Parallel()
	const first = "Mark it if I say so."
	model := newFakeModel(t, &script{first: first, outputs: [][]string{{call("c1", "mark", `{"label":"x"}`)}, {say("never")}}})
	a, dir := approvalAgent(t, model, 0)
	ctx, cancel := context.WithCancel(ctxT(t))
	// Nobody types; the prompt's appearance is the user's Ctrl-C.
	in, w := io.Pipe()
	defer w.Close()
	prompt := writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte("[y/N]")) {
			cancel()
		}
		return len(p), nil
	})
	var out *protocol.CallOutput
	a.Approve = approver("ask", in, prompt)
	a.OnEvent = func(_ string, ev protocol.Event) {
		if o, ok := ev.(*protocol.CallOutput); ok {
			out = o
		}
	}
	res, err := a.RunTurn(ctx, Turn{AgentID: "a1", TurnID: "t1", Context: approvalCtx, Message: first})
	if err != nil || !res.Cancelled || res.Steps != 1 {
		t.Fatalf("result %+v, %v", res, err)
	}
	if out == nil || out.Error == nil || out.Error.Kind != protocol.Aborted {
		t.Fatalf("the held call's output %+v", out)
	}
	if m := marks(t, dir); len(m) != 0 {
		t.Fatalf("marks %v", m)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
