package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// exampleWorker starts an embedded server and a worker with the
// diagnostics tools, and returns a connection for the gateway; stop ends
// them. It is what `turn-worker --embedded-nats` runs in one process.
func exampleWorker() (nc *nats.Conn, stop func()) {
	dir, err := os.MkdirTemp("", "gateway-example")
	if err != nil {
		log.Fatal(err)
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "js"), NoSigs: true, NoLog: true})
	if err != nil {
		log.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		log.Fatal("nats server not ready")
	}
	wnc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := engine.New(ctx, wnc, engine.Config{Name: "example", Grace: time.Second}, turn.NewAssembler(diagnostics.Category(diagnostics.Config{})), nil, quiet)
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	if nc, err = nats.Connect(ns.ClientURL()); err != nil {
		log.Fatal(err)
	}
	return nc, func() {
		cancel()
		<-done
		nc.Close()
		wnc.Close()
		ns.Shutdown()
		ns.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}
}

// exampleCatalog asks for agent a1's catalog of turnID until the
// example's worker answers.
func exampleCatalog(c *gateway.Client, turnID string, tc protocol.Context) *protocol.CatalogReply {
	for range 99 {
		if cat, err := c.Catalog(context.Background(), "a1", turnID, tc); err == nil {
			return cat
		}
		time.Sleep(50 * time.Millisecond)
	}
	cat, err := c.Catalog(context.Background(), "a1", turnID, tc)
	if err != nil {
		log.Fatal(err)
	}
	return cat
}

// One step of a turn: the model called ping twice; the step's outputs
// stream in as the calls end, and step.done holds the items for the
// model, in call order.
func ExampleClient_Send() {
	nc, stop := exampleWorker()
	defer stop()
	ctx := context.Background()
	c, err := gateway.New(nc, gateway.Options{})
	if err != nil {
		log.Fatal(err)
	}
	tc := protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{"diagnostics": true}}
	cat := exampleCatalog(c, "t1", tc) // the worker's service is up
	defs, _ := cat.Definitions()
	fmt.Println("tools:", len(defs))

	output := []json.RawMessage{
		json.RawMessage(`{"type":"function_call","call_id":"call_1","name":"ping","arguments":"{\"note\":\"one\"}"}`),
		json.RawMessage(`{"type":"function_call","call_id":"call_2","name":"ping","arguments":"{\"note\":\"two\"}"}`),
	}
	run, err := c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t1", Step: 0, Context: tc, Output: output})
	if err != nil {
		log.Fatal(err)
	}
	defer run.Close()
	outputs := 0
	for {
		ev, err := run.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		switch ev := ev.(type) {
		case *protocol.CallOutput:
			outputs++
		case *protocol.StepDone:
			fmt.Println("outputs:", outputs, "end_turn:", ev.EndTurn)
			for _, item := range ev.Items {
				fmt.Println(string(item))
			}
		}
	}
	// Output:
	// tools: 3
	// outputs: 2 end_turn: false
	// {"type":"function_call_output","call_id":"call_1","output":"pong one"}
	// {"type":"function_call_output","call_id":"call_2","output":"pong two"}
}

// A catalog goes to the model as the worker's bytes: wrapped with
// openai-go's param.Override, each definition is sent exactly as it came,
// so the request's tools have the catalog's digest (and the provider's
// prompt cache holds). Marshalling the SDK's own types would sort the
// keys of "parameters".
func ExampleClient_Catalog() {
	nc, stop := exampleWorker()
	defer stop()
	ctx := context.Background()
	c, err := gateway.New(nc, gateway.Options{})
	if err != nil {
		log.Fatal(err)
	}
	tc := protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{"diagnostics": true}}
	exampleCatalog(c, "t1", tc) // the worker's service is up
	cat, err := c.Catalog(ctx, "a1", "t1", tc)
	if err != nil {
		log.Fatal(err)
	}
	defs, err := cat.Definitions()
	if err != nil {
		log.Fatal(err)
	}
	tools := make([]responses.ToolUnionParam, len(defs))
	for i, d := range defs {
		tools[i] = param.Override[responses.ToolUnionParam](d)
	}
	body, err := json.Marshal(responses.ResponseNewParams{Model: "gpt-5.1", Tools: tools})
	if err != nil {
		log.Fatal(err)
	}
	var sent struct{ Tools json.RawMessage }
	if err := json.Unmarshal(body, &sent); err != nil {
		log.Fatal(err)
	}
	sum := sha256.Sum256(sent.Tools)
	fmt.Println(len(defs), "tools; digest kept:", hex.EncodeToString(sum[:]) == cat.Digest)
	// Output:
	// 3 tools; digest kept: true
}

// A malformed event is an error value that names what is wrong.
func ExampleDecodeEvent() {
	_, err := gateway.DecodeEvent("turn.call.output.a1.t1", []byte(`{"type":"step.done","agent_id":"a1","turn_id":"t2","step":0,"items":[]}`))
	fmt.Println(err)
	ev, _ := gateway.DecodeEvent("turn.activity.a1.t1", []byte(`{"call_id":"c1","name":"sleep","state":"started","label":"Waiting 5 ms"}`))
	fmt.Println(ev.(*protocol.Activity).Label)
	// Output:
	// bad event on turn.call.output.a1.t1: ids "a1"."t2" disagree with the subject
	// Waiting 5 ms
}

// A cancel aborts the turn's running calls on every worker; the step's
// step.done follows with end_turn set.
func ExampleClient_Cancel() {
	var c *gateway.Client // from gateway.New
	ctx := context.Background()
	if err := c.Cancel(ctx, "a1", "t1", "the user pressed stop"); err != nil {
		log.Print(err)
	}
}

// Workflow tasks start their own turns: every task.ready event is a task
// turn to drive, with the task's instructions as its user message.
func ExampleClient_WorkflowEvents() {
	var c *gateway.Client // from gateway.New
	ctx := context.Background()
	err := c.WorkflowEvents(ctx, "gateway", func(ctx context.Context, ev *protocol.WorkflowEvent) error {
		if ev.Type != protocol.EventTaskReady {
			return nil
		}
		tc := ev.TaskContext(map[string]bool{"web": true})
		go driveTurn(ev.AgentID, ev.TurnID, tc, ev.Instructions) // the gateway's own loop
		return nil
	})
	log.Print(err)
}

// A schedule fired: start a main turn for its agent. The fire's TurnID is
// the same on a redelivery, so the turn's steps are too.
func ExampleClient_ScheduleFires() {
	var c *gateway.Client // from gateway.New
	ctx := context.Background()
	err := c.ScheduleFires(ctx, "gateway", func(ctx context.Context, f *protocol.ScheduleFire) error {
		go driveTurn(f.AgentID, f.TurnID(), protocol.Context{Kind: protocol.KindText}, f.Instructions)
		return nil
	})
	log.Print(err)
}

// A job runner: run each started job in the background and report.
func ExampleClient_JobEvents() {
	var c *gateway.Client // from gateway.New
	ctx := context.Background()
	err := c.JobEvents(ctx, "job-runner", func(ctx context.Context, ev *protocol.JobEvent) error {
		if ev.Type != protocol.EventJobStart {
			return nil // a cancel: stop the job if it runs here
		}
		return c.ReportJob(ctx, ev.AgentID, ev.JobID, protocol.JobReport{Status: protocol.JobRunning, Seq: 1})
	})
	log.Print(err)
}

// A step whose calls need a person's approval is announced by a
// step.pending event; the step runs once every pending call is decided.
func ExampleClient_Decide() {
	var c *gateway.Client // from gateway.New
	var run *gateway.StepRun
	ctx := context.Background()
	ev, err := run.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if p, ok := ev.(*protocol.StepPending); ok {
		var ds []protocol.Decision
		for _, call := range p.Approvals {
			ds = append(ds, protocol.Decision{CallID: call.CallID, Approved: call.Name != "delete_page", Reason: "pages stay"})
		}
		if err := c.Decide(ctx, p.AgentID, p.TurnID, p.Step, 1, ds); err != nil {
			log.Fatal(err)
		}
	}
	// The same run goes on, with no new Send: every call's output (the
	// refused ones rejected, with the reason), then the step.done.
	done, err := run.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	log.Print(len(done.Items))
}

func driveTurn(agentID, turnID string, tc protocol.Context, userMessage string) {}

// A tenant's turns share one share of the fleet: every step (and the
// catalog request) of the turn carries the tenant's fairness key and its
// weight. A malformed one is refused before anything is published.
func ExampleFairness() {
	nc, stop := exampleWorker()
	defer stop()
	ctx := context.Background()
	c, err := gateway.New(nc, gateway.Options{})
	if err != nil {
		log.Fatal(err)
	}
	tc := protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{"diagnostics": true},
		Fairness: protocol.Fairness{Key: "tenant-42", Weight: 2}}
	exampleCatalog(c, "tf", tc) // the worker's service is up
	output := []json.RawMessage{json.RawMessage(`{"type":"function_call","call_id":"call_1","name":"ping","arguments":"{\"note\":\"hi\"}"}`)}
	run, err := c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "tf", Step: 0, Context: tc, Output: output})
	if err != nil {
		log.Fatal(err)
	}
	defer run.Close()
	done, err := run.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(done.Items[0]))

	bad := tc
	bad.Fairness = protocol.Fairness{Key: "tenant 42", Weight: 500}
	_, err = c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "tf2", Step: 0, Context: bad, Output: output})
	fmt.Println(errors.Is(err, protocol.ErrMalformed))
	// Output:
	// {"type":"function_call_output","call_id":"call_1","output":"pong hi"}
	// true
}
