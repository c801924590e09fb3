package worker

import (
	"context"
	"fmt"
	"maps"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/brain"
	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/category/diag"
	"github.com/agentbull/toolruntime/internal/category/jobs"
	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/category/schedule"
	"github.com/agentbull/toolruntime/internal/category/skills"
	"github.com/agentbull/toolruntime/internal/category/todo"
	"github.com/agentbull/toolruntime/internal/category/web"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/tool"
)

// Category is one entry of a worker's catalog: a built-in category,
// started with the worker from its flags (see DefaultCategories), or a
// category of your own tools (see Tools). A turn's catalog lists the
// tools of the categories in the order of Options.Categories.
type Category struct {
	name string
	// start makes the category's creator once the worker is connected;
	// nil when the flags switch the category off.
	start func(st *starting) (turn.Creator, error)
}

// Name is the category's name, as the worker's metadata lists it.
func (c Category) Name() string { return c.name }

// Tools makes c, a category of your own tools, an entry of a worker's
// catalog. Its Tools function is called for every step and catalog
// request; a panic in it, or a tool among those it returns that is nil
// or was not made by tool.New, fails the step like an error, and the
// worker goes on.
func Tools(c tool.Category) Category {
	return Category{name: c.Name, start: func(*starting) (turn.Creator, error) {
		if err := c.Validate(); err != nil {
			return nil, err
		}
		return func(ctx context.Context, env turn.Env) (ts []*tools.Tool, _ []string, err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("category %s panicked: %v", c.Name, r)
				}
			}()
			// A copy: what one category does to it no other sees.
			bindings := maps.Clone(env.Context.Bindings)
			if bindings == nil {
				bindings = map[string]bool{}
			}
			t := tool.Turn{AgentID: env.AgentID, TurnID: env.TurnID, Kind: env.Context.Kind, Bindings: bindings}
			ts, err = c.Tools(ctx, t)
			if err != nil {
				return nil, nil, fmt.Errorf("category %s: %w", c.Name, err)
			}
			// The assembler below reads every tool's Spec, outside this
			// recover: a nil one would crash the worker, not the request.
			for i, x := range ts {
				if x == nil || x.Definition() == nil {
					return nil, nil, fmt.Errorf("category %s: tool %d of %d is nil or was not made by tool.New", c.Name, i, len(ts))
				}
			}
			return ts, nil, nil
		}, nil
	}}
}

// DefaultCategories are the worker's built-in categories in their catalog
// order, as cmd/worker runs them: todo, computer, web, brain, schedules,
// background_jobs, workflows, skills, mcp and diagnostics. Each is on or
// off, and configured, by the worker's flags (--todo, --computer-root,
// --web-fetch, --mcp-config, --diagnostics, …), read when Main starts;
// those with state in JetStream create or update their buckets and
// streams then. The workflow tools use the web and brain categories
// listed before them; workflow task turns are served whether or not
// workflows is listed. Filter the list to leave a category out whatever
// the flags say.
func DefaultCategories() []Category {
	return []Category{
		{"todo", startTodo}, {"computer", startComputer}, {"web", startWeb}, {"brain", startBrain},
		{"schedules", startSchedules}, {"background_jobs", startJobs}, {"workflows", startWorkflows},
		// Skills, then MCP servers (those the turn names and those its
		// skills need): their namespaces come late, so the catalog's
		// prefix is stable.
		{"skills", startSkills}, {"mcp", startMCP}, {"diagnostics", startDiagnostics},
	}
}

// starting is what the categories share while the worker starts.
type starting struct {
	m     *program
	ctx   context.Context // the worker's whole run
	setup context.Context // the start only
	js    jetstream.JetStream
	topo  bus.Topology
	// The web and brain creators, for the workflow tools; the workflow
	// service, which also serves task turns.
	web, brain turn.Creator
	workflows  *workflowtask.Service
	// runs live and end with the worker; closers run once it stopped, in
	// reverse order.
	runs    []func(context.Context) error
	closers []func()
}

func (st *starting) close() {
	for i := len(st.closers) - 1; i >= 0; i-- {
		st.closers[i]()
	}
}

func startTodo(st *starting) (turn.Creator, error) {
	m := st.m
	if !m.TodoOn {
		return nil, nil
	}
	m.Todo.Replicas, m.Todo.Storage = st.topo.Replicas, st.topo.Storage
	td, err := todo.New(st.setup, st.js, m.Todo)
	if err != nil {
		return nil, err
	}
	return td.Creator(), nil
}

func startComputer(st *starting) (turn.Creator, error) {
	m := st.m
	if m.Computer.Root == "" {
		return nil, nil
	}
	m.Computer.Logger = m.log
	if m.Sandbox.Mode != "none" {
		// Opened here, so that it is closed after the sandbox.
		if _, _, err := st.cgroups(); err != nil {
			return nil, err
		}
	}
	sb, err := m.Sandbox.start(st.ctx, m.log, m.WebAllow)
	if err != nil {
		return nil, err
	}
	if sb != nil {
		st.closers = append(st.closers, func() { sb.Close() })
	}
	m.Computer.Sandbox, m.Computer.Unconfined = sb, m.Sandbox.Mode == "none"
	cc, err := computer.New(m.Computer)
	if err != nil {
		return nil, err
	}
	st.closers = append(st.closers, func() { cc.Close() })
	m.log.Info("computer tools on", "homes", cc.Root())
	return cc.Creator(), nil
}

func startWeb(st *starting) (turn.Creator, error) {
	m := st.m
	if !m.Web.Fetch && m.Web.SearchURL == "" {
		return nil, nil
	}
	wc, err := web.New(m.Web)
	if err != nil {
		return nil, err
	}
	st.closers = append(st.closers, func() { wc.Close() })
	st.web = wc.Creator()
	return st.web, nil
}

func startBrain(st *starting) (turn.Creator, error) {
	m := st.m
	if !m.BrainOn {
		return nil, nil
	}
	m.Brain.Replicas, m.Brain.Storage = st.topo.Replicas, st.topo.Storage
	br, err := brain.New(st.setup, st.js, m.Brain)
	if err != nil {
		return nil, err
	}
	st.brain = br.Creator()
	return st.brain, nil
}

func startSchedules(st *starting) (turn.Creator, error) {
	m := st.m
	if !m.SchedulesOn {
		return nil, nil
	}
	m.Schedules.Replicas, m.Schedules.Storage = st.topo.Replicas, st.topo.Storage
	sc, err := schedule.New(st.setup, st.js, m.Schedules)
	if err != nil {
		return nil, err
	}
	return sc.Creator(), nil
}

func startJobs(st *starting) (turn.Creator, error) {
	m := st.m
	if !m.JobsOn {
		return nil, nil
	}
	m.Jobs.Replicas, m.Jobs.Storage, m.Jobs.Logger = st.topo.Replicas, st.topo.Storage, m.log
	js, err := jobs.New(st.setup, st.js, m.Jobs)
	if err != nil {
		return nil, err
	}
	// The job report watcher lives and ends with the worker.
	st.runs = append(st.runs, js.Watch)
	return js.Creator(), nil
}

func startWorkflows(st *starting) (turn.Creator, error) {
	st.workflows = workflowtask.New(st.js, workflowtask.Config{Web: st.web, Brain: st.brain, Logger: st.m.log})
	return st.workflows.Creator(), nil
}

func startSkills(st *starting) (turn.Creator, error) {
	m := st.m
	if m.skills == nil {
		return nil, nil
	}
	m.log.Info("skills loaded", "dir", m.SkillsDir, "skills", m.skills.Names())
	return skills.Creator(m.skills), nil
}

func startMCP(st *starting) (turn.Creator, error) {
	m := st.m
	if m.mcp == nil {
		return nil, nil
	}
	opts := m.MCPBounds
	opts.Logger, opts.Version = m.log, m.version
	if m.mcp.HasStdio() {
		cg, err := st.mcpCgroups()
		if err != nil {
			return nil, err
		}
		opts.Cgroups = cg
	}
	mm, err := mcp.NewManager(*m.mcp, opts)
	if err != nil {
		return nil, err
	}
	// Runs after the worker stopped: running calls had their grace; then
	// every session ends and every stdio server is reaped.
	st.closers = append(st.closers, func() { mm.Close() })
	m.log.Info("mcp servers configured", "servers", mm.Servers())
	return mcp.Creator(mm, m.skills), nil
}

func startDiagnostics(st *starting) (turn.Creator, error) {
	m := st.m
	if !m.Diagnostics {
		return nil, nil
	}
	return diag.Creator(diag.Config{MarkDir: m.MarkDir}), nil
}
