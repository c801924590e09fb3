package worker

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/backgroundjobs"
	"github.com/agentbull/toolruntime/internal/category/brain"
	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/category/schedules"
	"github.com/agentbull/toolruntime/internal/category/skills"
	"github.com/agentbull/toolruntime/internal/category/todo"
	"github.com/agentbull/toolruntime/internal/category/web"
	"github.com/agentbull/toolruntime/internal/netguard"
	"github.com/agentbull/toolruntime/internal/tokenvault"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/tool"
)

// catalog lists the categories in catalog order, the program's own
// (own) between b's first and last, each name once; b may be nil.
func catalog(b *builtins, own []tool.Category) ([]tool.Category, error) {
	var es []tool.Category
	if b != nil {
		es = append(es, b.first...)
	}
	for _, c := range own {
		if err := c.Validate(); err != nil {
			return nil, err
		}
		es = append(es, c)
	}
	if b != nil {
		es = append(es, b.last...)
	}
	seen := map[string]bool{}
	for _, e := range es {
		if seen[e.Name] {
			return nil, fmt.Errorf("two categories are named %q", e.Name)
		}
		seen[e.Name] = true
	}
	return es, nil
}

// builtins are the program's built-in categories, as its flags switch and
// configure them: first todo, computer, web, brain, schedules,
// background_jobs and workflows, then (after the program's own) skills,
// mcp and diagnostics, whose namespaces and tools vary by turn, so that
// the catalog's prefix is stable. Tasks serves workflow task turns (with
// the web and brain tools), whether or not the workflow tools are on.
type builtins struct {
	first, last []tool.Category
	tasks       *workflowtask.Service
	// runs live and end with the worker; closers run once it stopped, in
	// reverse order.
	runs    []func(context.Context) error
	closers []func()
}

func (b *builtins) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

// startBuiltins starts the categories the flags switch on; those with
// state in JetStream create or update their buckets and streams within
// setup. Each gets what it needs here, in the open: the workflow tools
// and task turns get the web and brain categories made before them.
func (m *program) startBuiltins(ctx, setup context.Context, js jetstream.JetStream) (_ *builtins, err error) {
	b := &builtins{}
	name := ""
	defer func() {
		if err != nil {
			b.close()
			err = m.storageHint(fmt.Errorf("category %s: %w", name, err))
		}
	}()
	topo := m.Worker.Topology.WithDefaults()
	if m.TodoOn {
		name, m.Todo.Replicas, m.Todo.Storage = "todo", topo.Replicas, topo.Storage
		td, err := todo.New(setup, js, m.Todo)
		if err != nil {
			return nil, err
		}
		b.first = append(b.first, td.Category())
	}
	if m.Computer.Root != "" {
		name = "computer"
		cc, err := m.startComputer(ctx, b)
		if err != nil {
			return nil, err
		}
		b.first = append(b.first, cc.Category())
	}
	var webTools, brainTools tool.Category
	if m.Web.Fetch || m.Web.SearchURL != "" {
		name = "web"
		wc, err := web.New(m.Web)
		if err != nil {
			return nil, err
		}
		b.closers = append(b.closers, func() { wc.Close() })
		webTools = wc.Category()
		b.first = append(b.first, webTools)
	}
	if m.BrainOn {
		name, m.Brain.Replicas, m.Brain.Storage = "brain", topo.Replicas, topo.Storage
		br, err := brain.New(setup, js, m.Brain)
		if err != nil {
			return nil, err
		}
		brainTools = br.Category()
		b.first = append(b.first, brainTools)
	}
	if m.SchedulesOn {
		name, m.Schedules.Replicas, m.Schedules.Storage = "schedules", topo.Replicas, topo.Storage
		sc, err := schedules.New(setup, js, m.Schedules)
		if err != nil {
			return nil, err
		}
		b.first = append(b.first, sc.Category())
	}
	if m.JobsOn {
		name, m.Jobs.Replicas, m.Jobs.Storage, m.Jobs.Logger = "background_jobs", topo.Replicas, topo.Storage, m.log
		jb, err := backgroundjobs.New(setup, js, m.Jobs)
		if err != nil {
			return nil, err
		}
		b.runs = append(b.runs, jb.Watch) // the job report watcher
		b.first = append(b.first, jb.Category())
	}
	b.tasks = workflowtask.New(js, workflowtask.Config{Web: webTools, Brain: brainTools, Logger: m.log})
	b.first = append(b.first, b.tasks.Category())
	if m.skills != nil {
		m.log.Info("skills loaded", "dir", m.SkillsDir, "skills", m.skills.Names())
		b.last = append(b.last, skills.Category(m.skills))
	}
	if m.mcp != nil {
		name = "mcp"
		mm, err := m.startMCP(setup, b, js)
		if err != nil {
			return nil, err
		}
		b.last = append(b.last, mcp.Category(mm, m.skills))
	}
	if m.Diagnostics {
		b.last = append(b.last, diagnostics.Category(diagnostics.Config{MarkDir: m.MarkDir}))
	}
	if off := m.categoriesOff(); len(off) > 0 {
		m.log.Info("categories off, each with the flag that turns it on", off...)
	}
	return b, nil
}

// categoriesOff lists the built-in categories the flags leave off, each
// with the flag that turns it on, as slog attributes: the start log says
// what is on ("connected", categories=…), and this what is not.
func (m *program) categoriesOff() []any {
	var off []any
	for _, c := range []struct {
		on         bool
		name, flag string
	}{
		{m.TodoOn, "todo", "--todo"},
		{m.Computer.Root != "", "computer", "--computer-root <dir>"},
		{m.Web.Fetch || m.Web.SearchURL != "", "web", "--web-fetch or --web-search-url <url>"},
		{m.BrainOn, "brain", "--brain"},
		{m.SchedulesOn, "schedules", "--schedules"},
		{m.JobsOn, "background_jobs", "--background-jobs"},
		{m.skills != nil, "skills", "--skills-dir <dir>"},
		{m.mcp != nil, "mcp", "--mcp-config <file>"},
		{m.Diagnostics, "diagnostics", "--diagnostics"},
	} {
		if !c.on {
			off = append(off, slog.String(c.name, c.flag))
		}
	}
	return off
}

// startComputer starts the agent computer, with run_command's sandbox
// (closed after the computer, the cgroups after the sandbox).
func (m *program) startComputer(ctx context.Context, b *builtins) (*computer.Category, error) {
	m.Computer.Logger = m.log
	if m.Sandbox.Mode != "none" {
		if _, _, err := m.cgroups(b); err != nil {
			return nil, err
		}
	}
	sb, err := m.Sandbox.start(ctx, m.log, m.WebAllow)
	if err != nil {
		return nil, err
	}
	if sb != nil {
		b.closers = append(b.closers, func() { sb.Close() })
	}
	m.Computer.Sandbox, m.Computer.Unconfined = sb, m.Sandbox.Mode == "none"
	cc, err := computer.New(m.Computer)
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() { cc.Close() })
	m.log.Info("computer tools on", "homes", cc.Root())
	return cc, nil
}

// startMCP starts the MCP manager, closed after the worker stopped:
// running calls had their grace; then every session ends and every stdio
// server is reaped.
func (m *program) startMCP(ctx context.Context, b *builtins, js jetstream.JetStream) (*mcp.Manager, error) {
	opts := m.MCPBounds
	opts.Logger, opts.Version = m.log, m.version
	allow, err := netguard.ParseAllow(splitList(m.WebAllow))
	if err != nil {
		return nil, fmt.Errorf("--web-allow: %w", err)
	}
	opts.Guard, opts.ConnectURL = netguard.New(allow, nil), m.MCPConnectURL
	if m.mcp.HasOAuth() {
		// The keys never leave the process: not NATS, not a log.
		keys, err := tokenvault.LoadKeyring(m.MCPTokenKeys, "TOOLRUNTIME_MCP_TOKEN_KEYS")
		if err != nil {
			return nil, fmt.Errorf("mcp oauth servers need token keys: %w", err)
		}
		if opts.Vault, err = tokenvault.Open(ctx, js, keys, tokenvault.Options{}); err != nil {
			return nil, err
		}
	}
	if m.mcp.HasStdio() {
		cg, err := m.mcpCgroups(b)
		if err != nil {
			return nil, err
		}
		opts.Cgroups = cg
	}
	mm, err := mcp.NewManager(*m.mcp, opts)
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() { mm.Close() })
	m.log.Info("mcp servers configured", "servers", mm.Servers())
	return mm, nil
}
