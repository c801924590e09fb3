package computer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbull/toolruntime/internal/sandbox"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Binding is the context binding that offers the category to a main turn.
const Binding = "computer"

// Tool names, in catalog order.
const (
	ListFilesName  = "list_files"
	ReadFileName   = "read_file"
	WriteFileName  = "write_file"
	EditFileName   = "edit_file"
	RunCommandName = "run_command"
)

// Defaults of a zero Config field.
const (
	DefaultOutputBudget      = 16 << 10
	DefaultCommandTimeout    = 2 * time.Minute
	DefaultMaxCommandTimeout = 10 * time.Minute
	DefaultMaxLogBytes       = 64 << 20
	DefaultMaxFileBytes      = 16 << 20
	DefaultPath              = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	DefaultShell             = "/bin/sh"
	DefaultLang              = "C.UTF-8"
)

// MinOutputBudget is the smallest OutputBudget New accepts: room for a
// useful head and tail besides the notes.
const MinOutputBudget = 2 << 10

// Config configures the category. Root is required; the zero value of
// every other field is its default.
type Config struct {
	// Root is the directory that holds the agent homes, <Root>/<agent_id>.
	// New creates it (mode 0700) when it does not exist. All workers that
	// may run an agent's turns must see the same Root (a shared volume),
	// or the gateway must route an agent's turns to one worker.
	Root string
	// OutputBudget bounds the text of any one result the model reads, in
	// bytes (16 KiB). Longer text keeps its head and tail.
	OutputBudget int
	// CommandTimeout is run_command's time limit when a call sets none
	// (2 min).
	CommandTimeout time.Duration
	// MaxCommandTimeout bounds the time limit a call may ask for (10 min).
	MaxCommandTimeout time.Duration
	// MaxLogBytes bounds the output of one command kept in the home's
	// .outputs directory (64 MiB); more is counted but not kept.
	MaxLogBytes int64
	// MaxFileBytes bounds the files edit_file rewrites and the content
	// write_file writes (16 MiB).
	MaxFileBytes int64
	// HomeQuotaBytes bounds what each home holds on disk, its files'
	// blocks (1 GiB); HomeQuotaFiles bounds its files, directories and
	// links (100,000). A negative value turns that bound off. See
	// quotas for how they are held.
	HomeQuotaBytes int64
	HomeQuotaFiles int64
	// DiskReserve is the free space the homes together never take from
	// their file system (DefaultDiskReserve, at most an eighth of the
	// file system; negative: none), with DefaultDiskReserveFiles inodes
	// (at most an eighth): a write_file that would take it is refused,
	// and a command that grows its home once less than twice it is free
	// is stopped. It keeps room for what shares the file system, a
	// JetStream store above all.
	DiskReserve int64
	// StorePath is the JetStream store's directory when it is known (the
	// embedded server's, or an external server's given by the operator):
	// the start log says whether it shares the homes' file system.
	StorePath string
	// QuotaMode says how homes are held to their quota: QuotaEstimate
	// (the default), QuotaKernel (a file system of its own per home; New
	// fails when the host does not allow it) or QuotaAuto (kernel where
	// the host allows it, with the reason in the log when not).
	QuotaMode string
	// Path is the PATH commands get (DefaultPath).
	Path string
	// Lang is the LANG commands get (C.UTF-8).
	Lang string
	// Env adds KEY=value entries to the environment of commands. Nothing
	// of the worker's own environment reaches a command otherwise.
	Env []string
	// Shell runs a command as Shell -c <command> (/bin/sh).
	Shell string
	// Logger gets the repairs of the homes' root and of the homes (nil:
	// nothing is logged).
	Logger *slog.Logger
	// Sandbox runs every command (see internal/sandbox). Without it
	// run_command is not offered, unless Unconfined is set.
	Sandbox *sandbox.Sandbox
	// Unconfined offers run_command without a sandbox: commands run as
	// the worker's user and reach whatever it can (the operator's
	// explicit --command-sandbox none).
	Unconfined bool
}

func (c Config) withDefaults() Config {
	if c.OutputBudget == 0 {
		c.OutputBudget = DefaultOutputBudget
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = DefaultCommandTimeout
	}
	if c.MaxCommandTimeout == 0 {
		c.MaxCommandTimeout = max(DefaultMaxCommandTimeout, c.CommandTimeout)
	}
	if c.MaxLogBytes == 0 {
		c.MaxLogBytes = DefaultMaxLogBytes
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.HomeQuotaBytes == 0 {
		c.HomeQuotaBytes = DefaultHomeQuotaBytes
	}
	if c.HomeQuotaFiles == 0 {
		c.HomeQuotaFiles = DefaultHomeQuotaFiles
	}
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.Lang == "" {
		c.Lang = DefaultLang
	}
	if c.Shell == "" {
		c.Shell = DefaultShell
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Root == "" {
		errs = append(errs, errors.New("computer: the homes' root directory is not set"))
	}
	if c.OutputBudget < MinOutputBudget {
		errs = append(errs, fmt.Errorf("computer: output budget %d is below the minimum of %d bytes", c.OutputBudget, MinOutputBudget))
	}
	if c.CommandTimeout < 0 || c.MaxCommandTimeout < c.CommandTimeout {
		errs = append(errs, fmt.Errorf("computer: command timeout %s must be between 0 and the maximum %s", c.CommandTimeout, c.MaxCommandTimeout))
	}
	if c.MaxLogBytes < 0 || c.MaxFileBytes < 0 {
		errs = append(errs, errors.New("computer: byte limits must not be negative"))
	}
	if !filepath.IsAbs(c.Shell) {
		errs = append(errs, fmt.Errorf("computer: shell %q is not an absolute path", c.Shell))
	}
	for _, kv := range c.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, "\x00 ") {
			errs = append(errs, fmt.Errorf("computer: environment entry %q is not KEY=value", kv))
		}
		switch k {
		case "PATH", "HOME", "LANG", "TMPDIR":
			errs = append(errs, fmt.Errorf("computer: environment entry %q sets %s, which the worker sets itself", kv, k))
		}
	}
	return errors.Join(errs...)
}

// Category is the computer category: the homes and the tools, built once
// and shared by every turn.
type Category struct {
	cfg   Config
	homes *homes
	tools []*tool.Tool
}

// New checks cfg, opens (creating it when missing) the homes' root and
// builds the tools.
func New(cfg Config) (*Category, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	commands := cfg.Sandbox != nil || cfg.Unconfined
	// A worker image without a shell cannot run commands; say so at
	// start rather than in every run_command.
	if fi, err := os.Stat(cfg.Shell); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("computer: shell %s is not an executable file (run_command needs an image with a shell): %v", cfg.Shell, err)
	}
	var o *owner
	if cfg.Sandbox != nil {
		if uid, gid, ok := cfg.Sandbox.Owner(); ok {
			o = &owner{uid: uid, gid: gid}
		}
	}
	h, err := openHomes(cfg.Root, cfg.Logger, o, newQuotas(cfg.HomeQuotaBytes, cfg.HomeQuotaFiles))
	if err != nil {
		return nil, err
	}
	cfg.Root = h.dir
	if err := chooseQuotaMode(h, cfg); err != nil {
		_ = h.close()
		return nil, err
	}
	keepReserve(h, cfg)
	c := &Category{cfg: cfg, homes: h}
	c.tools = []*tool.Tool{c.listFiles(), c.readFile(), c.writeFile(), c.editFile()}
	if commands {
		c.tools = append(c.tools, c.runCommand())
	}
	return c, nil
}

// Close releases the homes' root.
func (c *Category) Close() error { return c.homes.close() }

// Tools returns the category's tools, in catalog order.
func (c *Category) Tools() []*tool.Tool { return c.tools }

// Root is the absolute directory of the homes.
func (c *Category) Root() string { return c.cfg.Root }

// Category returns the category: its tools for a turn that binds
// "computer".
func (c *Category) Category() tool.Category {
	return tool.NewCategory(Binding, c.tools...)
}

// homeOf opens the calling agent's home.
// open opens the calling agent's home and resolves path beneath it; the
// caller closes the home.
func (c *Category) open(ctx context.Context, path string) (*home, string, error) {
	h, _, err := c.homeOf(ctx)
	if err != nil {
		return nil, "", err
	}
	rel, err := h.rel(path)
	if err != nil {
		h.close()
		return nil, "", err
	}
	return h, rel, nil
}

func (c *Category) homeOf(ctx context.Context) (*home, tool.Call, error) {
	call, ok := tool.CallFrom(ctx)
	if !ok || !protocol.ValidID(call.AgentID) {
		return nil, call, tool.Errorf(tool.Internal, "the call carries no agent identity, so there is no home to work in")
	}
	h, err := c.homes.open(call.AgentID)
	if err != nil {
		return nil, call, fmt.Errorf("the home directory could not be opened: %w", err)
	}
	return h, call, nil
}
