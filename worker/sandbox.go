package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/agentbull/toolruntime/internal/netguard"
	"github.com/agentbull/toolruntime/internal/sandbox"
)

// commandSandbox is the configuration of run_command's sandbox.
type commandSandbox struct {
	Mode     string // bwrap or none
	Network  bool
	ReadOnly string
	Config   sandbox.Config
}

func (c *commandSandbox) flags(fs *flag.FlagSet) {
	l := &c.Config.Limits
	fs.StringVar(&c.Mode, "command-sandbox", "bwrap", "how run_command confines commands: bwrap (a bubblewrap sandbox per command; run_command is not offered when it does not work) or none (commands run as the worker's user and reach all it can: a warning at every start)")
	fs.BoolVar(&c.Network, "command-network", false, "let sandboxed commands reach the network through the worker's proxy, to public addresses (and --web-allow) only; off: no network at all")
	fs.StringVar(&c.ReadOnly, "command-ro-bind", "", "more host paths (comma-separated, absolute) that commands see read-only, e.g. /opt")
	fs.IntVar(&l.Processes, "command-max-procs", sandbox.DefaultProcesses, "processes and threads one command may have at once (RLIMIT_NPROC in its own user namespace)")
	fs.Int64Var(&l.MemoryBytes, "command-max-memory", sandbox.DefaultMemoryBytes, "address space of each process of a command, in bytes (RLIMIT_AS)")
	fs.IntVar(&l.CPUSeconds, "command-max-cpu", sandbox.DefaultCPUSeconds, "CPU seconds of each process of a command (RLIMIT_CPU)")
	fs.Int64Var(&l.FileBytes, "command-max-file-bytes", sandbox.DefaultFileBytes, "largest file a command may write, in bytes (RLIMIT_FSIZE)")
	fs.IntVar(&l.OpenFiles, "command-max-open-files", sandbox.DefaultOpenFiles, "open files of each process of a command (RLIMIT_NOFILE)")
	fs.Int64Var(&l.TmpBytes, "command-tmp-bytes", sandbox.DefaultTmpBytes, "size of a command's private /tmp (and /dev/shm), in bytes; it lives in memory")
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
	if err != nil {
		log.Error("run_command is not offered: its sandbox does not work here (the other computer tools are); "+
			"install it with apt-get install -y bubblewrap, or start with --command-sandbox none to run commands unconfined", "err", err)
		return nil, nil
	}
	l := sb.Limits()
	log.Info("run_command sandboxed with bubblewrap", "network", c.Network, "max_procs", l.Processes, "max_memory", l.MemoryBytes,
		"max_cpu_s", l.CPUSeconds, "max_file_bytes", l.FileBytes, "max_open_files", l.OpenFiles, "tmp_bytes", l.TmpBytes)
	return sb, nil
}
