package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/agentbull/toolruntime/internal/cgroup"
	"github.com/agentbull/toolruntime/internal/netguard"
	"github.com/agentbull/toolruntime/internal/sandbox"
)

// commandSandbox is the configuration of run_command's sandbox.
type commandSandbox struct {
	Mode     string // bwrap or none
	Network  bool
	ReadOnly string
	Config   sandbox.Config
	// CgroupRoot is where commands' cgroups are made: auto, none or a
	// directory.
	CgroupRoot      string
	WorkerMemoryMin int64
	protect         error // lowering the worker's oom_score_adj

	// The subtree, opened once for commands and MCP servers (cgroups).
	cgOpened bool
	cg       *cgroup.Manager
	cgWhy    error // why there is none
	cgErr    error // an explicit --cgroup-root that cannot be used
	cgNoJoin bool  // a command could not join its group: MCP servers go without
	logger   *slog.Logger
}

// defaultWorkerMemoryMin is the memory.min of the worker's own leaf
// cgroup: enough for its heap and goroutines when commands press.
const defaultWorkerMemoryMin = 128 << 20

// workerOOMScore is the worker's own oom_score_adj where it may lower it:
// the kernel's out-of-memory killer then takes commands (1000) first.
const workerOOMScore = -900

func (c *commandSandbox) register(fs *flag.FlagSet) {
	l := &c.Config.Limits
	fs.StringVar(&c.Mode, "command-sandbox", "bwrap", "how run_command confines commands: bwrap (a bubblewrap sandbox per command; run_command is not offered when it does not work) or none (commands run as the worker's user and reach all it can: a warning at every start)")
	fs.BoolVar(&c.Network, "command-network", false, "let sandboxed commands reach the network through the worker's proxy, to public addresses (and --web-allow) only; off: no network at all")
	fs.DurationVar(&c.Config.ProxyIdle, "command-proxy-idle", sandbox.DefaultProxyIdle, "with --command-network: close a command's proxy connection or CONNECT tunnel through which no byte passed either way for this long")
	fs.IntVar(&c.Config.ProxyConns, "command-proxy-conns", sandbox.DefaultProxyConns, "with --command-network: connections one command may have open through the proxy at once; one more gets 503")
	fs.IntVar(&c.Config.Spares, "command-spares", sandbox.DefaultSpares, "sandboxes made ahead for the next commands of each home that ran one, so that a command waits for its shell's start only: one per home, up to 8 while its commands come faster than one is made (those beyond the first share half of this bound; -1: none, each command waits for its sandbox's making)")
	fs.DurationVar(&c.Config.SpareIdle, "command-spare-idle", sandbox.DefaultSpareIdle, "end a home's spare sandbox no command took for this long (its spares beyond the first: after 5s)")
	fs.StringVar(&c.ReadOnly, "command-ro-bind", "", "more host paths (comma-separated, absolute) that commands see read-only, e.g. /opt")
	fs.IntVar(&l.Processes, "command-max-procs", sandbox.DefaultProcesses, "processes and threads one command may have at once (RLIMIT_NPROC in its own user namespace)")
	fs.Int64Var(&l.MemoryBytes, "command-max-memory", sandbox.DefaultMemoryBytes, "address space of each process of a command, in bytes (RLIMIT_AS)")
	fs.IntVar(&l.CPUSeconds, "command-max-cpu", sandbox.DefaultCPUSeconds, "CPU seconds of each process of a command (RLIMIT_CPU)")
	fs.Int64Var(&l.FileBytes, "command-max-file-bytes", sandbox.DefaultFileBytes, "largest file a command may write, in bytes (RLIMIT_FSIZE)")
	fs.IntVar(&l.OpenFiles, "command-max-open-files", sandbox.DefaultOpenFiles, "open files of each process of a command (RLIMIT_NOFILE)")
	fs.Int64Var(&l.TmpBytes, "command-tmp-bytes", sandbox.DefaultTmpBytes, "size of a command's private /tmp (and /dev/shm), in bytes; it lives in memory")
	fs.Int64Var(&l.Memory, "command-memory", sandbox.DefaultMemory, "all the memory one command may hold, in bytes: its processes', its /tmp and /dev/shm, memfds and shared memory (the memory limit of its own cgroup; without cgroups, /tmp, /dev/shm and --command-max-memory are shrunk to fit it)")
	fs.IntVar(&l.Pids, "command-pids", sandbox.DefaultPids, "processes and threads of one command's cgroup at once (pids.max)")
	fs.Float64Var(&l.CPU, "command-cpu", sandbox.DefaultCPU, "CPU of one command's cgroup, in cores (cpu.max)")
	fs.StringVar(&c.CgroupRoot, "cgroup-root", "auto", "where each command's cgroup is made: auto (beneath the worker's own cgroup, when it is delegated: cgroup v2, or the v1 memory controller), none (no cgroups: rlimits only), or a cgroup directory")
	fs.Int64Var(&c.WorkerMemoryMin, "worker-memory-min", defaultWorkerMemoryMin, "memory.min of the worker's own leaf cgroup on cgroup v2, in bytes: memory the kernel leaves the worker when commands press")
	fs.IntVar(&c.Config.UID, "command-uid", sandbox.DefaultUID, "user (and group) commands run as when the worker runs as root: the kernel holds no root process to a process limit")
}

func (c *commandSandbox) validate() error {
	switch c.Mode {
	case "bwrap":
	case "none":
		if c.Network {
			return errors.New("--command-network needs --command-sandbox bwrap")
		}
	default:
		return fmt.Errorf("--command-sandbox must be bwrap or none, not %q", c.Mode)
	}
	// Zero is refused as the other flags refuse it: the library reads a
	// zero limit as "the default", which on the command line would be a
	// silent surprise (--command-max-procs 0 meaning 256).
	l := c.Config.Limits
	var errs []error
	for _, z := range []struct {
		flag string
		zero bool
	}{
		{"--command-max-procs", l.Processes == 0}, {"--command-max-memory", l.MemoryBytes == 0},
		{"--command-max-cpu", l.CPUSeconds == 0}, {"--command-max-file-bytes", l.FileBytes == 0},
		{"--command-max-open-files", l.OpenFiles == 0}, {"--command-tmp-bytes", l.TmpBytes == 0},
		{"--command-memory", l.Memory == 0}, {"--command-pids", l.Pids == 0}, {"--command-cpu", l.CPU == 0},
		{"--command-proxy-idle", c.Config.ProxyIdle == 0}, {"--command-proxy-conns", c.Config.ProxyConns == 0},
	} {
		if z.zero {
			errs = append(errs, fmt.Errorf("%s must be more than 0 (leave it out for the default)", z.flag))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := l.Validate(); err != nil {
		return err
	}
	if c.Config.ProxyIdle < time.Second || c.Config.ProxyConns < 1 {
		return fmt.Errorf("--command-proxy-idle must be at least 1s (not %s) and --command-proxy-conns at least 1 (not %d)", c.Config.ProxyIdle, c.Config.ProxyConns)
	}
	if c.CgroupRoot != "auto" && c.CgroupRoot != "none" && !filepath.IsAbs(c.CgroupRoot) {
		return fmt.Errorf("--cgroup-root must be auto, none or an absolute cgroup directory, not %q", c.CgroupRoot)
	}
	if c.Config.UID < 1 {
		return fmt.Errorf("--command-uid must be an unprivileged user, not %d", c.Config.UID)
	}
	c.Config.GID = c.Config.UID
	c.Config.ReadOnly = splitList(c.ReadOnly)
	return nil
}

// start makes the sandbox and tries it. A sandbox that does not work is
// not fatal: the worker runs on without run_command, and says why.
func (c *commandSandbox) start(ctx context.Context, log *slog.Logger, webAllow string) (*sandbox.Sandbox, error) {
	if c.Mode == "none" {
		log.Warn("run_command is NOT sandboxed (--command-sandbox none): commands run as the worker's user and can read its environment and files, every agent's home and the network")
		return nil, nil
	}
	cfg := c.Config
	cfg.Network, cfg.Logger = c.Network, log
	cg, why, err := c.cgroups()
	if err != nil {
		return nil, err
	}
	cfg.Cgroups = cg
	if c.Network {
		allow, err := netguard.ParseAllow(splitList(webAllow))
		if err != nil {
			return nil, fmt.Errorf("--web-allow: %w", err)
		}
		cfg.Guard = netguard.New(allow, nil)
	}
	sb, err := sandbox.New(cfg)
	if err == nil {
		if err = sb.Check(ctx); err != nil {
			sb.Close()
		}
	}
	if err != nil && cg != nil && c.CgroupRoot == "auto" {
		// The subtree looked usable and is not (a command cannot join
		// it): commands run without cgroups rather than not at all.
		why = fmt.Errorf("a command could not run in a cgroup of its own: %w", err)
		cfg.Cgroups, cfg.Limits = nil, c.Config.Limits
		c.cgNoJoin, c.cgWhy = true, why
		if sb, err = sandbox.New(cfg); err == nil {
			if err = sb.Check(ctx); err != nil {
				sb.Close()
			}
		}
	}
	if err != nil {
		log.Error("run_command is not offered: its sandbox does not work here (the other computer tools are); "+
			"install it with apt-get install -y bubblewrap, or start with --command-sandbox none to run commands unconfined", "err", err)
		return nil, nil
	}
	c.report(log, sb, cg, why)
	l := sb.Limits()
	log.Info("run_command sandboxed with bubblewrap", "network", c.Network, "cgroups", sb.Cgroups(), "command_memory", l.Memory, "command_pids", l.Pids, "command_cpu", l.CPU, "max_procs", l.Processes, "max_memory", l.MemoryBytes,
		"max_cpu_s", l.CPUSeconds, "max_file_bytes", l.FileBytes, "max_open_files", l.OpenFiles, "tmp_bytes", l.TmpBytes,
		"extended_attributes", "refused (seccomp: setting one fails with ENOTSUP)",
		"fallocate", "refused but punching holes (seccomp: EOPNOTSUPP; posix_fallocate writes each block instead)",
		"io_uring", "refused (seccomp: ENOSYS)")
	return sb, nil
}

// cgroups opens the subtree the commands' cgroups are made in (nil, and
// why, when there is none), and lowers the worker's own out-of-memory
// score where it may. An explicit --cgroup-root that cannot be used is
// an error.
// The subtree is opened once, for commands and MCP servers alike.
func (c *commandSandbox) cgroups() (m *cgroup.Manager, why, err error) {
	if c.cgOpened {
		return c.cg, c.cgWhy, c.cgErr
	}
	c.cgOpened = true
	c.protect = cgroup.Protect(workerOOMScore)
	if c.CgroupRoot == "none" {
		c.cgWhy = errors.New("--cgroup-root none")
		return nil, c.cgWhy, nil
	}
	m, why = cgroup.Open(cgroup.Options{Root: c.CgroupRoot, WorkerMemoryMin: c.WorkerMemoryMin, Logger: c.logger})
	if why != nil && c.CgroupRoot != "auto" {
		c.cgErr = fmt.Errorf("--cgroup-root %s: %w", c.CgroupRoot, why)
		return nil, nil, c.cgErr
	}
	c.cg, c.cgWhy = m, why
	return m, why, nil
}

// cgroups opens the subtree for the categories that start processes; the
// first to open it has it closed after every category (Close waits for
// the groups' removals).
func (p *program) cgroups(b *builtins) (m *cgroup.Manager, why, err error) {
	c := &p.Sandbox
	first := !c.cgOpened
	c.logger = p.log
	m, why, err = c.cgroups()
	if first && m != nil {
		b.closers = append(b.closers, func() {
			if err := m.Close(); err != nil {
				p.log.Warn("cgroups left at stop; the next start removes them", "err", err)
			}
		})
	}
	return m, why, err
}

// mcpCgroups is the subtree MCP stdio servers get groups in, or nil; the
// start log says which in one line.
func (p *program) mcpCgroups(b *builtins) (*cgroup.Manager, error) {
	m, why, err := p.cgroups(b)
	if err != nil {
		return nil, err
	}
	if m != nil && p.Sandbox.cgNoJoin {
		m, why = nil, p.Sandbox.cgWhy
	}
	l := p.MCPBounds.Limits
	if m == nil {
		p.log.Warn("MCP stdio servers have no cgroup of their own: what they hold is charged to the worker's cgroup (they raise their oom_score_adj to 1000)", "reason", why)
		return nil, nil
	}
	p.log.Info("each MCP stdio server runs in a cgroup of its own", "mcp_memory", l.MemoryBytes, "mcp_pids", l.Pids, "mcp_cpu", l.CPU, "parent", m.Parent())
	return m, nil
}

// report says, once the sandbox works, whether commands run in cgroups
// of their own: without, in one line.
func (c *commandSandbox) report(log *slog.Logger, sb *sandbox.Sandbox, m *cgroup.Manager, why error) {
	if c.protect != nil {
		log.Debug("the worker's oom_score_adj is not lowered (not permitted); commands raise theirs to 1000", "err", c.protect)
	}
	if sb.Cgroups() {
		log.Info("each command runs in a cgroup of its own", "cgroup_version", m.Version(), "controllers", m.Controllers(), "parent", m.Parent())
		return
	}
	log.Warn("commands have no cgroup of their own: their memory is bounded only by rlimits, with /tmp and /dev/shm shrunk to fit --command-memory", "reason", why)
}
