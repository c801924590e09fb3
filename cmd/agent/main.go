// Command agent is the reference agent loop: a small gateway that drives
// turns of the tool runtime against any OpenAI Responses-compatible
// endpoint, with the public gateway client and openai-go.
//
//	agent [flags] "message"     drive one main turn and print the model's answer
//	agent --tasks [flags]       drive the task turns of workflows until interrupted
//
// The endpoint and key come from --base-url and --api-key, or, as the SDK
// reads them, from OPENAI_BASE_URL and OPENAI_API_KEY. The catalog's tool
// definitions and the workers' output items reach the model as the bytes
// the workers sent. Calls that wait for a person's approval are asked
// about on the terminal (--approve ask), or all approved or refused.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/protocol"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	natsURL, creds           string
	baseURL, apiKey, model   string
	agentID, turnID          string
	bind, mcp, skills        string
	taskBind                 string
	instructions, durable    string
	maxSteps                 int
	tasks, schedules, events bool
	store                    bool
	approve                  string
	message                  string
	// fairness is the share the turns draw from (protocol 1.2).
	fairness protocol.Fairness
}

func parse(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.natsURL, "nats-url", envOr("NATS_URL", nats.DefaultURL), "NATS server URL, as the worker's --nats-url (env NATS_URL)")
	fs.StringVar(&c.creds, "creds", "", "NATS credentials file")
	fs.StringVar(&c.baseURL, "base-url", "", "Responses API base URL (default: env OPENAI_BASE_URL, else OpenAI's)")
	fs.StringVar(&c.apiKey, "api-key", "", "API key (default: env OPENAI_API_KEY)")
	fs.StringVar(&c.model, "model", envOr("OPENAI_MODEL", "gpt-5.1"), "model name (env OPENAI_MODEL)")
	fs.StringVar(&c.agentID, "agent", "agent", "agent id")
	fs.StringVar(&c.turnID, "turn", "", "turn id (default: a new one)")
	fs.StringVar(&c.bind, "bind", "", "comma-separated bindings of the turn (web,brain,computer,todo,schedules,background_jobs,diagnostics)")
	fs.StringVar(&c.mcp, "mcp", "", "comma-separated MCP servers of the turn")
	fs.StringVar(&c.skills, "skills", "", "comma-separated skills of the turn")
	fs.StringVar(&c.taskBind, "task-bind", "web,brain", "comma-separated bindings of task turns")
	fs.StringVar(&c.instructions, "instructions", "You are a helpful agent. Use the tools when they help.", "system instructions of every turn")
	fs.StringVar(&c.durable, "durable", "agent", "durable consumer name for task.ready and schedule fires (gateways sharing it share the work)")
	fs.IntVar(&c.maxSteps, "max-steps", 50, "most model responses in one turn")
	fs.BoolVar(&c.tasks, "tasks", false, "drive the task turns of workflows (task.ready events)")
	fs.BoolVar(&c.schedules, "schedules", false, "start a main turn (with --bind, --mcp and --skills) for every schedule fire")
	fs.StringVar(&c.approve, "approve", "ask", "calls that wait for approval: ask (on the terminal), all (approve every one) or none (refuse every one)")
	fs.BoolVar(&c.store, "store", false, "let the provider store the responses (off: reasoning items come back encrypted)")
	fs.BoolVar(&c.events, "v", false, "print the steps' events on stderr")
	fs.StringVar(&c.fairness.Key, "fairness-key", "", "fairness key of every turn, shared by a tenant's agents (1-64 characters of [A-Za-z0-9_.:-]; empty: the agent's own)")
	fs.Float64Var(&c.fairness.Weight, "fairness-weight", 0, "fairness weight of every turn, 0.01 to 100 (0: the default, 1)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c.message = strings.Join(fs.Args(), " ")
	if c.message == "" && !c.tasks && !c.schedules {
		return nil, errors.New("give a message, or --tasks or --schedules to serve")
	}
	// The workers' own parser judges the flags, as it will judge the steps.
	if raw, err := json.Marshal(c.fairness); err != nil || json.Unmarshal(raw, new(protocol.Fairness)) != nil {
		if err == nil {
			err = json.Unmarshal(raw, new(protocol.Fairness))
		}
		return nil, fmt.Errorf("--fairness-key %q --fairness-weight %v: %v", c.fairness.Key, c.fairness.Weight, err)
	}
	switch c.approve {
	case "ask", "all", "none":
	default:
		return nil, fmt.Errorf("--approve %q is not ask, all or none", c.approve)
	}
	if c.turnID == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		c.turnID = "turn_" + hex.EncodeToString(b)
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parse(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	nopts := []nats.Option{nats.Name("agent"), nats.MaxReconnects(-1)}
	if c.creds != "" {
		nopts = append(nopts, nats.UserCredentials(c.creds))
	}
	nc, err := nats.Connect(c.natsURL, nopts...)
	if err != nil {
		return fmt.Errorf("nats %s: %w", c.natsURL, err)
	}
	defer nc.Close()
	gw, err := gateway.New(nc, gateway.Options{Logger: log})
	if err != nil {
		return err
	}
	// Without flags the SDK reads OPENAI_BASE_URL and OPENAI_API_KEY.
	var mopts []option.RequestOption
	if c.baseURL != "" {
		mopts = append(mopts, option.WithBaseURL(c.baseURL))
	}
	if c.apiKey != "" {
		mopts = append(mopts, option.WithAPIKey(c.apiKey))
	}
	a := &Agent{GW: gw, Model: openai.NewClient(mopts...), ModelName: c.model, Instructions: c.instructions,
		MaxSteps: c.maxSteps, Store: c.store, TaskBindings: set(c.taskBind), TaskFairness: c.fairness, Log: log}
	a.Approve = approver(c.approve, os.Stdin, stderr)
	if c.events {
		a.OnEvent = func(turnID string, ev protocol.Event) { printEvent(stderr, turnID, ev) }
	}

	// The context of the main turn, and of the turns schedule fires start.
	tc := protocol.Context{Kind: protocol.KindText, Bindings: set(c.bind), MCPServers: list(c.mcp), Skills: list(c.skills), Fairness: c.fairness}
	serve, stopServing := context.WithCancel(ctx)
	defer stopServing()
	var wg sync.WaitGroup
	served := func(what string, err error) {
		if serve.Err() == nil {
			log.Error("serving stopped", "what", what, "err", err)
		}
	}
	if c.tasks {
		wg.Go(func() { served("task turns", a.ServeTasks(serve, c.durable)) })
	}
	if c.schedules {
		wg.Go(func() {
			served("schedule fires", gw.ScheduleFires(serve, c.durable, func(_ context.Context, f *protocol.ScheduleFire) error {
				a.tasks.Add(1)
				go func() {
					defer a.tasks.Done()
					a.fired(serve, f, tc, stdout)
				}()
				return nil
			}))
		})
	}
	if c.message == "" {
		<-ctx.Done()
		stopServing()
		wg.Wait()
		a.WaitTasks()
		return nil
	}
	res, err := a.RunTurn(ctx, Turn{AgentID: c.agentID, TurnID: c.turnID, Context: tc, Message: c.message})
	if res != nil && res.Text != "" {
		fmt.Fprintln(stdout, res.Text)
	}
	if err == nil && res.Cancelled {
		err = errors.New("the turn was cancelled")
	}
	// Task turns the main turn started run to their end (or to ^C).
	a.WaitTasksOrDone(ctx)
	stopServing()
	wg.Wait()
	return err
}

// fired drives the main turn of a schedule fire.
func (a *Agent) fired(ctx context.Context, f *protocol.ScheduleFire, tc protocol.Context, stdout io.Writer) {
	res, err := a.RunTurn(ctx, Turn{AgentID: f.AgentID, TurnID: f.TurnID(), Context: tc, Message: f.Instructions})
	if err != nil {
		a.Log.Error("scheduled turn failed", "schedule_id", f.ScheduleID, "err", err)
		return
	}
	fmt.Fprintf(stdout, "[%s] %s\n", f.ScheduleID, res.Text)
}

// WaitTasksOrDone waits for the running task turns, or until ctx ends.
func (a *Agent) WaitTasksOrDone(ctx context.Context) {
	done := make(chan struct{})
	go func() { a.WaitTasks(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// approver decides pending calls as --approve says: all, none, or by
// asking on the terminal, one call at a time (end of input refuses, and
// so does the turn's end while it asks: Ctrl-C then cancels the turn).
func approver(mode string, in io.Reader, out io.Writer) func(context.Context, protocol.PendingCall) protocol.Decision {
	switch mode {
	case "all":
		return func(context.Context, protocol.PendingCall) protocol.Decision {
			return protocol.Decision{Approved: true}
		}
	case "none":
		return func(context.Context, protocol.PendingCall) protocol.Decision {
			return protocol.Decision{Reason: "the agent's operator refuses every call that needs approval"}
		}
	}
	var mu sync.Mutex // task turns ask at once; one question at a time
	// The terminal is read on a goroutine of its own, so that a question
	// is given up when its turn ends rather than holding the turn.
	lines := make(chan string)
	var reading sync.Once
	return func(ctx context.Context, call protocol.PendingCall) protocol.Decision {
		mu.Lock()
		defer mu.Unlock()
		reading.Do(func() {
			go func() {
				sc := bufio.NewScanner(in)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
		})
		fmt.Fprintf(out, "approve %s %s (%s)? [y/N] ", toolName(call), call.Arguments, call.Reason)
		select {
		case line, ok := <-lines:
			if ok && strings.EqualFold(strings.TrimSpace(line), "y") {
				return protocol.Decision{Approved: true}
			}
		case <-ctx.Done():
			fmt.Fprintln(out)
		}
		return protocol.Decision{Reason: "refused by the agent's operator"}
	}
}

// toolName is a pending call's tool as the catalog's approval list names
// it: "name" or "namespace.name".
func toolName(call protocol.PendingCall) string {
	if call.Namespace != "" {
		return call.Namespace + "." + call.Name
	}
	return call.Name
}

func printEvent(w io.Writer, turnID string, ev protocol.Event) {
	switch ev := ev.(type) {
	case *protocol.StepPending:
		for _, call := range ev.Approvals {
			fmt.Fprintf(w, "%s  step %d waits for approval: %s %s %s (%s)\n", turnID, ev.Step, call.CallID, toolName(call), call.Arguments, call.Reason)
		}
	case *protocol.Activity:
		fmt.Fprintf(w, "%s  %s %s: %s\n", turnID, ev.State, ev.Name, ev.Label)
	case *protocol.CallOutput:
		status := ev.Status
		if ev.Error != nil {
			status = string(ev.Error.Kind)
		}
		fmt.Fprintf(w, "%s  %s %s → %s (%d ms)\n", turnID, ev.CallID, ev.Name, status, ev.DurationMS)
	case *protocol.StepDone:
		fmt.Fprintf(w, "%s  step %d done, end_turn %v\n", turnID, ev.Step, ev.EndTurn)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func set(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range list(s) {
		m[f] = true
	}
	return m
}
