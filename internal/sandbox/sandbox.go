package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbull/toolruntime/internal/cgroup"
	"github.com/agentbull/toolruntime/internal/netguard"
)

// Defaults of a zero Limits field.
const (
	DefaultProcesses   = 256
	DefaultMemoryBytes = 4 << 30
	DefaultCPUSeconds  = 600
	DefaultFileBytes   = 1 << 30
	DefaultOpenFiles   = 1024
	DefaultTmpBytes    = 256 << 20
	DefaultMemory      = 512 << 20
	DefaultPids        = 512
	DefaultCPU         = 1.0
)

// Nice is the scheduling niceness every command runs at (set on the
// sandbox's pid 1 before the command starts, see gate): the worker, at 0, wins the CPU from its commands when
// they contend for it, so that a command cannot starve what watches it
// (the disk quota's follower, the output reader) on a busy host. Idle
// CPU is still the commands' in full.
const Nice = 10

// DefaultUID is the user a command runs as when the worker runs as root
// (nobody).
const DefaultUID = 65534

// ProxyPort is where a command finds the egress proxy, on the sandbox's
// own loopback.
const ProxyPort = 3128

// proxySocket is where the proxy's unix socket is bound in the sandbox.
const proxySocket = "/run/toolruntime/proxy.sock"

// Install is the hint a missing sandbox is reported with.
const Install = "install bubblewrap (Debian/Ubuntu: apt-get install -y bubblewrap; for --command-network also socat) " +
	"and allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 or user.max_user_namespaces > 0; " +
	"in a container: a seccomp/AppArmor profile that permits unshare and mount, e.g. securityContext seccompProfile Unconfined " +
	"and appArmorProfile Unconfined, or run it privileged)"

// Limits bound each command. Memory, Pids and CPU bound the sum over a
// command's processes: they are the limits of the command's own cgroup
// (Config.Cgroups). The others are rlimits, set inside the sandbox before
// the shell starts, which bound each process. Without cgroups, New counts
// the tmpfs sizes and the address space in Memory instead (see New).
type Limits struct {
	// Memory is all the memory one command may hold (512 MiB): its
	// processes', its /tmp and /dev/shm pages, memfds and shared memory,
	// as its cgroup counts it. Beyond it the kernel's out-of-memory
	// killer kills processes of the command, and only of the command.
	Memory int64
	// Pids bounds the processes and threads of the command's cgroup (512),
	// the sandbox's own few included.
	Pids int
	// CPU is the command's CPU bandwidth, in cores (1).
	CPU float64
	// Processes bounds RLIMIT_NPROC: the processes and threads of the
	// command's user inside its own user namespace, that is the
	// sandbox's processes only (256). fork fails with EAGAIN beyond it.
	Processes int
	// MemoryBytes bounds RLIMIT_AS: the address space of each process
	// (4 GiB), so the sum is up to Processes times it. Allocations beyond
	// it fail with ENOMEM.
	MemoryBytes int64
	// CPUSeconds bounds RLIMIT_CPU: the CPU time of each process (600 s);
	// SIGXCPU at the limit, SIGKILL a second later.
	CPUSeconds int
	// FileBytes bounds RLIMIT_FSIZE: the size any process may grow a file
	// to (1 GiB); SIGXFSZ beyond it. It bounds each file, not the disk the
	// home uses.
	FileBytes int64
	// OpenFiles bounds RLIMIT_NOFILE: open descriptors of each process
	// (1024).
	OpenFiles int
	// TmpBytes is the size of /tmp and of /dev/shm, each a private tmpfs
	// (256 MiB each), which lives in memory.
	TmpBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.Processes == 0 {
		l.Processes = DefaultProcesses
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.CPUSeconds == 0 {
		l.CPUSeconds = DefaultCPUSeconds
	}
	if l.FileBytes == 0 {
		l.FileBytes = DefaultFileBytes
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = DefaultOpenFiles
	}
	if l.TmpBytes == 0 {
		l.TmpBytes = DefaultTmpBytes
	}
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.Pids == 0 {
		l.Pids = DefaultPids
	}
	if l.CPU == 0 {
		l.CPU = DefaultCPU
	}
	return l
}

// Validate says which limits are too low to run anything; a zero field
// is its default.
func (l Limits) Validate() error {
	l = l.withDefaults()
	var errs []error
	if l.Processes < 8 {
		errs = append(errs, fmt.Errorf("sandbox: process limit %d is below 8 (the sandbox's own init, shell and bridge count)", l.Processes))
	}
	if l.MemoryBytes < 64<<20 {
		errs = append(errs, fmt.Errorf("sandbox: memory limit %d is below 64 MiB", l.MemoryBytes))
	}
	if l.Memory < 64<<20 {
		errs = append(errs, fmt.Errorf("sandbox: command memory %d is below 64 MiB", l.Memory))
	}
	if l.Pids < 16 || l.CPU < 0.01 {
		errs = append(errs, errors.New("sandbox: a command's cgroup needs at least 16 pids and 0.01 CPU"))
	}
	if l.CPUSeconds < 1 || l.FileBytes < 1<<20 || l.OpenFiles < 16 || l.TmpBytes < 1<<20 {
		errs = append(errs, errors.New("sandbox: the CPU limit must be at least 1 s, the file size and /tmp limits 1 MiB, the open files limit 16"))
	}
	return errors.Join(errs...)
}

// Config configures the sandbox. The zero value of every field is its
// default.
type Config struct {
	// Bwrap is bubblewrap's path ("bwrap" looked up in PATH).
	Bwrap string
	// ReadOnly are more host paths bound read-only at the same place
	// (e.g. /opt); paths that do not exist are skipped.
	ReadOnly []string
	// Limits bound each command.
	Limits Limits
	// UID and GID are the user a command runs as when the worker runs as
	// root (65534, nobody); otherwise it runs as the worker's user.
	UID, GID int
	// Network lets commands reach the network through the egress proxy,
	// which dials through Guard.
	Network bool
	// Guard is the proxy's policy (netguard.New(nil, nil): public
	// addresses only).
	Guard *netguard.Guard
	// Logger logs the proxy's refusals at debug level.
	Logger *slog.Logger
	// Cgroups, when set, gives each command a cgroup of its own with
	// Limits.Memory, Pids and CPU. Without it New shrinks /tmp, /dev/shm
	// and the address space to fit Limits.Memory.
	Cgroups *cgroup.Manager
	// ProxyIdle closes a command's proxy connection or tunnel through
	// which no byte passed for this long (0: DefaultProxyIdle); all of a
	// command's close when it ends.
	ProxyIdle time.Duration
	// ProxyConns bounds the connections one command has open through the
	// proxy at once (0: DefaultProxyConns).
	ProxyConns int
	// Spares bounds the sandboxes made ahead for the homes (with their
	// shell and environment) that ran a command: one per home, more
	// while its commands come faster than one is made, those beyond a
	// home's first within half of the bound (see spares; 0:
	// DefaultSpares; negative: none, each command waits for its
	// sandbox's making).
	Spares int
	// OneShot gives every command a sandbox of its own (made ahead as a
	// spare) even where its home's helper could run it (see helper.go;
	// helpers need Cgroups and no Network).
	OneShot bool
	// SpareIdle ends a spare (or a home's helper) no command took for this long (0:
	// DefaultSpareIdle; a home's spares beyond its first: 5 s at most).
	SpareIdle time.Duration
}

// Sandbox runs commands in bubblewrap sandboxes; it is safe for
// concurrent use.
type Sandbox struct {
	cfg     Config
	bwrap   string
	setpriv string // set when the worker is root, with unshare
	unshare string
	socat   string // set with Network
	root    bool
	fsArgs  []string
	etcDir  string   // the copy of /etc's allowlist commands see as /etc
	etcLock *os.File // held while etcDir is in use (see copyEtc)
	proxy   *proxy
	spares  spares
	helpers helpers
	spawner spawner
	// extraIdle ends a home's spares beyond its first (see spares).
	extraIdle time.Duration
	// filter is the seccomp program every sandbox runs under
	// (seccomp.go).
	filter []byte
}

// New finds the tools a sandbox needs and, with Network, starts the
// egress proxy. It does not try the sandbox: Check does.
func New(cfg Config) (*Sandbox, error) {
	cfg.Limits = cfg.Limits.withDefaults()
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	if cfg.Cgroups == nil {
		cfg.Limits = cfg.Limits.fit()
	}
	if cfg.UID == 0 {
		cfg.UID = DefaultUID
	}
	if cfg.GID == 0 {
		cfg.GID = DefaultUID
	}
	if cfg.Bwrap == "" {
		cfg.Bwrap = "bwrap"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Spares == 0 {
		cfg.Spares = DefaultSpares
	}
	if cfg.SpareIdle <= 0 {
		cfg.SpareIdle = DefaultSpareIdle
	}
	s := &Sandbox{cfg: cfg, filter: noXattrFilter(), root: os.Geteuid() == 0, extraIdle: min(cfg.SpareIdle, extraIdle)}
	var errs []error
	look := func(name, why string) string {
		p, err := exec.LookPath(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s not found (%s)", name, why))
			return ""
		}
		abs, _ := filepath.Abs(p)
		return abs
	}
	s.bwrap = look(cfg.Bwrap, "bubblewrap makes the sandbox")
	if s.root {
		s.setpriv = look("setpriv", "util-linux: drops root")
		s.unshare = look("unshare", "util-linux: gives the command a user namespace of its own")
	}
	if cfg.Network {
		s.socat = look("socat", "bridges the sandbox's loopback to the proxy")
	}
	for _, p := range cfg.ReadOnly {
		if !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("read-only path %q is not absolute", p))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sandbox: %w; %s", err, Install)
	}
	etcDir, etcLock, err := copyEtc(cfg.ReadOnly)
	if err != nil {
		return nil, err
	}
	s.etcDir, s.etcLock = etcDir, etcLock
	s.fsArgs = fsArgs(etcDir, cfg.ReadOnly, cfg.Limits.TmpBytes, !s.root)
	if cfg.Network {
		g := cfg.Guard
		if g == nil {
			g = netguard.New(nil, nil)
		}
		p, err := startProxy(g, s.root, cfg.UID, cfg.GID, cfg.ProxyIdle, cfg.ProxyConns, cfg.Logger)
		if err != nil {
			removeEtc(etcDir, etcLock)
			return nil, err
		}
		s.proxy = p
	}
	return s, nil
}

// fit shrinks the limits that bound memory without a cgroup so that they
// sum to at most Memory: each tmpfs to at most a quarter of it, the
// address space of a process to the rest. It is still a bound per
// process: two processes may each hold the address space.
func (l Limits) fit() Limits {
	l.TmpBytes = min(l.TmpBytes, l.Memory/4)
	l.MemoryBytes = min(l.MemoryBytes, l.Memory-2*l.TmpBytes)
	return l
}

// Cgroups reports whether each command runs in a cgroup of its own.
func (s *Sandbox) Cgroups() bool { return s.cfg.Cgroups != nil }

// Close ends the spares and stops the egress proxy. A command still
// running in a sandbox that was a spare is killed (as when the worker
// dies): Close comes after the commands.
func (s *Sandbox) Close() error {
	s.closeHelpers(true)
	s.closeSpares()
	s.spawner.close()
	err := removeEtc(s.etcDir, s.etcLock)
	if s.proxy != nil {
		err = errors.Join(err, s.proxy.close())
	}
	return err
}

// Limits are the limits each command gets.
func (s *Sandbox) Limits() Limits { return s.cfg.Limits }

// Network reports whether commands reach the network through the proxy.
func (s *Sandbox) Network() bool { return s.proxy != nil }

// Owner is the user and group a command's files belong to: the sandbox's
// user when the worker is root, else the worker's own (ok false: nothing
// to change).
func (s *Sandbox) Owner() (uid, gid int, ok bool) {
	return s.cfg.UID, s.cfg.GID, s.root
}

// etc are the entries of /etc a shell and common tools need. The rest of
// /etc stays out: a container mounts secrets there.
var etc = []string{
	"passwd", "group", "hosts", "host.conf", "resolv.conf", "nsswitch.conf", "gai.conf",
	"services", "protocols", "networks", "ethertypes",
	"ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "zoneinfo",
	"alternatives", "mime.types", "magic", "magic.mime", "os-release", "debian_version", "lsb-release",
	"profile", "profile.d", "bash.bashrc", "inputrc", "environment", "locale.alias", "locale.conf",
	"gitconfig", "pip.conf", "npmrc", "python3", "perl", "java-17-openjdk", "java-21-openjdk", "fonts", "manpath.config",
}

// copyEtc copies the allowlist of /etc (and the --command-ro-bind paths
// beneath /etc) to a new directory, bound as the sandbox's /etc in one
// mount: a bind mount per entry would make every command's start pay for
// each of them. Each entry
// is copied as what it leads to (resolv.conf may be a link into /run);
// links inside a directory stay links, as a bound directory shows them;
// what the worker cannot read is left out. The copy is what /etc held
// when the worker started.
//
// Beside it, <dir>.lock is held locked (flock) while the copy is in use:
// the copies of workers that died without Close (killed, crashed) are
// removed by the next worker that makes one, which can take their locks.
func copyEtc(extra []string) (dir string, lock *os.File, err error) {
	sweepEtc()
	for {
		lock, err = os.CreateTemp("", "toolruntime-etc-*.lock")
		if err != nil {
			return "", nil, fmt.Errorf("sandbox: a directory for /etc: %w", err)
		}
		if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			break
		}
		// Another worker's sweep took it first, and removes it.
		lock.Close()
	}
	dir = strings.TrimSuffix(lock.Name(), ".lock")
	if err := os.Mkdir(dir, 0o700); err != nil {
		removeEtc("", lock)
		return "", nil, fmt.Errorf("sandbox: a directory for /etc: %w", err)
	}
	fail := func(err error) (string, *os.File, error) {
		removeEtc(dir, lock)
		return "", nil, fmt.Errorf("sandbox: copying /etc: %w", err)
	}
	names := slices.Clone(etc)
	for _, p := range extra {
		if r, err := filepath.Rel("/etc", filepath.Clean(p)); err == nil && filepath.IsLocal(r) {
			names = append(names, r)
		}
	}
	for _, e := range names {
		src := filepath.Join("/etc", e)
		fi, err := os.Stat(src)
		if err != nil {
			continue
		}
		dst := filepath.Join(dir, e)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fail(err)
		}
		copyEntry(src, dst, fi)
	}
	// Made 0700: the sandbox's user enters it as /etc.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	return dir, lock, nil
}

// removeEtc removes a copy of /etc (none: dir "") and its lock.
func removeEtc(dir string, lock *os.File) error {
	var err error
	if dir != "" {
		err = os.RemoveAll(dir)
	}
	_ = os.Remove(lock.Name())
	_ = lock.Close()
	return err
}

// sweepEtc removes the copies of /etc whose lock no worker holds.
func sweepEtc() {
	locks, _ := filepath.Glob(filepath.Join(os.TempDir(), "toolruntime-etc-*.lock"))
	for _, name := range locks {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			_ = removeEtc(strings.TrimSuffix(name, ".lock"), f)
			continue
		}
		f.Close()
	}
}

// copyEntry copies src (whose Stat or Lstat is fi) to dst, leaving out
// what it cannot read and all but the permission bits.
func copyEntry(src, dst string, fi fs.FileInfo) {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		if t, err := os.Readlink(src); err == nil {
			_ = os.Symlink(t, dst)
		}
	case fi.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return
		}
		ents, _ := os.ReadDir(src)
		for _, e := range ents {
			if info, err := e.Info(); err == nil {
				copyEntry(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), info)
			}
		}
		_ = os.Chmod(dst, fi.Mode().Perm())
	case fi.Mode().IsRegular():
		b, err := os.ReadFile(src)
		if err == nil {
			_ = os.WriteFile(dst, b, fi.Mode().Perm())
			_ = os.Chmod(dst, fi.Mode().Perm())
		}
	}
}

// fsArgs are the mounts every sandbox has, in order. With roProc (a
// worker that is not root), /proc is read-only: a command reads it as
// before but writes nothing there, not the nice of its session group
// (/proc/self/autogroup, which any user may set back to 0 on its own
// processes) that the worker lowers near a home's bounds, where the
// worker has no cgroup to pace it with. Its oom_score_adj is set from
// outside (Sandbox.limit). A root worker's chain writes the nested user
// namespace's uid_map there (unshare), and paces with cgroups.
func fsArgs(etcDir string, extra []string, tmpBytes int64, roProc bool) []string {
	a := []string{"--ro-bind", "/usr", "/usr", "--ro-bind", etcDir, "/etc"}
	made := map[string]bool{"/": true, "/usr": true, "/etc": true}
	bind := func(flag, p string) {
		a = parents(a, made, p)
		a = append(a, flag, p, p)
		made[p] = true
	}
	// Merged /usr makes these symbolic links; older systems have them
	// as directories of their own.
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			bind("--ro-bind", d)
		}
	}
	for _, p := range extra {
		p = filepath.Clean(p)
		if r, err := filepath.Rel("/etc", p); err == nil && r != "." && filepath.IsLocal(r) {
			continue // in the copy of /etc
		}
		bind("--ro-bind-try", p)
	}
	size := strconv.FormatInt(tmpBytes, 10)
	a = append(a, "--proc", "/proc")
	if roProc {
		a = append(a, "--remount-ro", "/proc")
	}
	a = append(a,
		"--dev", "/dev",
		"--perms", "1777", "--size", size, "--tmpfs", "/dev/shm",
		"--remount-ro", "/dev",
		"--perms", "1777", "--size", size, "--tmpfs", "/tmp",
	)
	return a
}

// parents adds to a the directories above p that made does not hold yet,
// top down, as plain 0755 directories: bwrap would otherwise give them
// the host's modes (a 0700 homes' root) or none a command may enter.
func parents(a []string, made map[string]bool, p string) []string {
	var up []string
	for d := filepath.Dir(p); !made[d]; d = filepath.Dir(d) {
		up = append(up, d)
		made[d] = true
	}
	for i := len(up) - 1; i >= 0; i-- {
		a = append(a, "--perms", "0755", "--dir", up[i])
	}
	return a
}

// Spec is one command.
type Spec struct {
	// Home is the absolute directory bound read-write at the same path:
	// the only writable place besides /tmp, and the working directory.
	Home string
	// Shell runs the command as Shell -c Command.
	Shell   string
	Command string
	// Env is the command's whole environment; with the network on, the
	// proxy's variables are added.
	Env []string
	// FileBytes, when positive and below Limits.FileBytes, is this
	// command's RLIMIT_FSIZE instead (the room left in a disk quota),
	// rounded down to a multiple of 1 KiB (at least 1 KiB), and FileWhy
	// says why in the notes ("the room left in …").
	FileBytes int64
	FileWhy   string
	// Ready, when set, is called with the command's Run after its
	// sandbox is made and before the command is sent to it: what must
	// watch the command from its first instruction (Tree, Throttle)
	// is in place before the command can do anything.
	Ready func(*Run)
}

// Run is a started command.
type Run struct {
	Cmd   *exec.Cmd
	left  *os.File
	block *os.File // gate.blockW, closed by End
	group *cgroup.Group
	// proxy is the command's proxy session, closed with End or at the
	// end of Start's context, whichever comes first.
	proxy *session
	stop  func() bool
	// unbind stops tying the sandbox's context to the call's; cancel
	// ends it.
	unbind func() bool
	cancel context.CancelFunc
	refill func()     // makes the home's next spare
	hr     *helperRun // set when the home's helper runs the command (Cmd is nil)
	// fileBytes and fileWhy are the command's own file size limit, when
	// Spec lowered it.
	fileBytes int64
	fileWhy   string
}

// wrapper is the sandbox's first shell: it enters the home ($3; bwrap
// cannot, having dropped its capabilities before the command's user
// exists), makes itself (and so every process of the command) the
// kernel's first choice to kill when memory runs out, sets RLIMIT_NPROC
// to $4 (a root worker's command has made its own user namespace since
// the worker set the other limits on the sandbox's pid 1; the limit must
// be set after it exists, see Start; the worker reads the wrapper's
// /proc limits once it is ready and ends a sandbox where it did not
// take: dash's read takes a byte per system call, so reading
// /proc/self/limits here would cost every sandbox one per byte), starts the
// network bridge when asked ($5: port, $6: socket, $7: the listening
// address as /proc/net/tcp spells it; all three empty: no bridge) and
// waits until it listens. Then it says on fd 7 that it is ready and reads from
// fd 6 a line with the command's own RLIMIT_FSIZE in bytes, a multiple
// of 1024 (empty: pid 1's; ulimit's unit is 512 bytes in dash, 1024 in
// bash, /proc/self/limits tells which took; the worker cannot prlimit
// a process of another user without CAP_SYS_RESOURCE, which containers
// drop), and then its command up to EOF (the worker appends a newline,
// which it takes off; nothing at all: the spare is not used, it
// exits), runs it ($1 -c command) with nothing on fds 3, 6 and 7 and
// the locale variables ($8 on, NAME=value) exported, and then says on fd 3
// whether the command left processes running, which die with the
// sandbox when it exits. ulimit's option for processes is -p in dash
// and -u in bash (where -p, the pipe size, cannot be set).
const wrapper = `cd "$3" || exit 126
echo 1000 >/proc/self/oom_score_adj 2>/dev/null
ulimit -p "$4" 2>/dev/null || ulimit -u "$4" 2>/dev/null || { echo "sandbox: cannot set the process limit" >&2; exit 126; }
px=
ready() { while read -r _ l _ st _; do [ "$l" = "$1" ] && [ "$st" = 0A ] && return 0; done </proc/net/tcp; return 1; }
if [ -n "$5" ]; then
  socat TCP-LISTEN:"$5",bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:"$6" </dev/null >/dev/null 2>&1 3>&- 6<&- 7>&- &
  px=$!
  i=0
  until ready "$7"; do
    i=$((i+1))
    if [ $i -ge 200000 ]; then echo "sandbox: the network bridge did not start" >&2; break; fi
  done
fi
echo r >&7
exec 7>&-
fsize() { while read -r a b c s h _; do [ "$a $b $c" = "Max file size" ] && [ "$s" = "$1" ] && [ "$h" = "$1" ] && return 0; done </proc/self/limits; return 1; }
IFS= read -r fz <&6 || exit 125
if [ -n "$fz" ]; then
  ulimit -f $((fz/512)) 2>/dev/null; fsize "$fz" || ulimit -f $((fz/1024)) 2>/dev/null
  fsize "$fz" || { echo "sandbox: cannot set the file size limit" >&2; exit 126; }
fi
c= nl='
'
while IFS= read -r l; do c=$c$l$nl; done <&6
exec 6<&-
[ -n "$c" ] || exit 125
sh1=$1
shift 7
for v do export "$v"; done
"$sh1" -c "${c%?}" 3>&-
s=$?
for p in /proc/[0-9]*; do
  n=${p#/proc/}
  case $n in 1|$$|"$px") continue;; esac
  read -r st 2>/dev/null <"$p/stat" || continue
  set -- ${st##*") "}
  case $1 in Z*|X*) continue;; esac
  [ -n "$px" ] && [ "$2" = "$px" ] && continue
  echo left >&3
  break
done
exit $s
`

// Start starts spec's command in a new sandbox. The caller sets Stdout
// and Stderr on nothing: Start takes them from out; it waits with
// r.Cmd.Wait and then asks r.Leftovers. ctx's end kills the sandbox.
//
// The sandbox is a spare when one is ready for spec's home, shell and
// environment (see spare.go): made beforehand, it waits, namespaces,
// mounts, limits, cgroup and bridge in place, for its command on a
// pipe, so that a command pays for the start of a shell only. Else it
// is made now. Either way a spare for the next command of the same home
// is made in the background.
func (s *Sandbox) Start(ctx context.Context, spec Spec, out io.Writer, waitDelay time.Duration) (*Run, error) {
	return s.start(ctx, spec, out, waitDelay, true)
}

func (s *Sandbox) start(ctx context.Context, spec Spec, out io.Writer, waitDelay time.Duration, refill bool) (*Run, error) {
	home := filepath.Clean(spec.Home)
	if !filepath.IsAbs(home) || home == "/" {
		return nil, fmt.Errorf("sandbox: home %q is not an absolute directory", spec.Home)
	}
	if strings.IndexByte(spec.Command, 0) >= 0 || strings.IndexByte(spec.Shell, 0) >= 0 {
		return nil, errors.New("sandbox: the command holds a NUL byte")
	}
	spec.Home = home
	key := spareKey(spec)
	if refill && s.useHelpers() {
		// Twice: a helper that ended after its last command (it left
		// something it could not clean) is made again.
		for range 2 {
			h := s.helperFor(key, spec)
			if h == nil {
				break
			}
			r, err := s.runInHelper(ctx, h, spec, out, waitDelay)
			if !errors.Is(err, errHelperGone) {
				return r, err
			}
		}
	}
	p := s.take(ctx, key, home)
	if p == nil {
		var err error
		if p, err = s.prepare(spec, false, ""); err != nil {
			return nil, err
		}
	}
	r, err := s.claim(ctx, p, spec, out, waitDelay)
	if err == nil && refill {
		// After the command, off its path: a spare made beside it
		// would take CPU from it.
		r.refill = func() { s.refill(key, spec) }
	}
	return r, err
}

// prepare starts a sandbox for spec's home, shell and environment that
// waits for its command (see claim); niced: at Nice from its start (a
// spare made in the background, see spawner). With ioDir, the sandbox is
// a helper's (see helper.go): ioDir is bound at ioMount, its first shell
// is helperScript, and its fd 7 stays open.
func (s *Sandbox) prepare(spec Spec, niced bool, ioDir string) (*spare, error) {
	home := spec.Home
	// The home as it is before bwrap binds it: a spare whose home was
	// removed and made again while it was being made binds the old one,
	// and must not serve (p.home stays nil, and take discards it).
	before, beforeErr := os.Stat(home)
	// fds 4 and 5: see gate.
	// fd 8: the seccomp filter (seccomp.go), which bwrap reads and closes.
	a := []string{"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--info-fd", "4", "--block-fd", "5", "--seccomp", "8"}
	if s.root {
		// Privileged bwrap, no user namespace: the command then drops to
		// an unprivileged user, whom RLIMIT_NPROC binds (root it never
		// does). setpriv needs these three, and drops them.
		a = append(a, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
			"--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP")
	} else {
		a = append(a, "--unshare-all", "--unshare-user", "--disable-userns")
	}
	a = append(a, "--hostname", "sandbox")
	a = append(a, s.fsArgs...)
	a = parents(a, map[string]bool{"/": true, "/tmp": true, "/usr": true, "/etc": true}, home)
	a = append(a, "--bind", home, home)
	// The locale reaches the command through the wrapper, not the
	// chain before it: setpriv and unshare would each load every
	// category of it (files opened and mapped for every sandbox).
	env, locale := splitLocale(spec.Env)
	bridge := []string{"", "", ""}
	var sess *session
	if s.proxy != nil {
		var err error
		if sess, err = s.proxy.session(); err != nil {
			return nil, err
		}
		a = append(a, "--perms", "0755", "--dir", "/run", "--perms", "0755", "--dir", filepath.Dir(proxySocket), "--bind", sess.path, proxySocket)
		url := fmt.Sprintf("http://127.0.0.1:%d", ProxyPort)
		env = append(env[:len(env):len(env)],
			"HTTP_PROXY="+url, "HTTPS_PROXY="+url, "http_proxy="+url, "https_proxy="+url,
			"ALL_PROXY="+url, "all_proxy="+url, "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1")
		bridge = []string{strconv.Itoa(ProxyPort), proxySocket, fmt.Sprintf("0100007F:%04X", ProxyPort)}
	}
	script, io2 := wrapper, ""
	if ioDir != "" {
		a = append(a, "--perms", "0755", "--dir", "/run", "--perms", "0755", "--dir", filepath.Dir(ioMount), "--bind", ioDir, ioMount)
		script, io2 = helperScript, ioMount
	}
	a = append(a, "--")
	if s.root {
		// A user namespace of its own, made after root is gone, so that
		// RLIMIT_NPROC counts this sandbox's processes, not those of
		// every sandbox running as the same user.
		a = append(a, s.setpriv, "--reuid="+strconv.Itoa(s.cfg.UID), "--regid="+strconv.Itoa(s.cfg.GID),
			"--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--",
			s.unshare, "--user", "--map-current-user", "--keep-caps", "--",
			// The new namespace came with every capability in it: none
			// is left for the command.
			s.setpriv, "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--")
	}
	l := s.cfg.Limits
	a = append(a, "/bin/sh", "-c", script, "sandbox", spec.Shell, io2, home, strconv.Itoa(l.Processes))
	a = append(a, bridge...)
	a = append(a, locale...)

	var g *cgroup.Group
	var cmd *exec.Cmd
	if s.cfg.Cgroups != nil {
		var err error
		if g, err = s.cfg.Cgroups.New(cgroup.Limits{MemoryBytes: l.Memory, Pids: l.Pids, CPU: l.CPU}); err != nil {
			sess.closeNil()
			return nil, fmt.Errorf("sandbox: the command's cgroup: %w", err)
		}
	}
	// The spare's own context: claim ties it to the call's.
	ctx, cancel := context.WithCancel(context.Background())
	cmd = exec.CommandContext(ctx, s.bwrap, a...)
	o := &outSwitch{}
	cmd.Env = env
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = o, o
	// The outer bwrap dies with the worker; the sandbox's init dies with
	// the outer bwrap (--die-with-parent), and every process of the
	// sandbox with its init.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if fd := g.FD(); fd != nil {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(fd.Fd())
	}
	cmd.Cancel = func() error {
		g.Kill()
		return cmd.Process.Kill()
	}
	var fail []io.Closer
	undo := func(err error) (*spare, error) {
		cancel()
		for _, f := range fail {
			f.Close()
		}
		sess.closeNil()
		if cerr := g.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	lr, lw, err := os.Pipe()
	if err != nil {
		return undo(err)
	}
	fail = append(fail, lr, lw)
	cr, cw, err := os.Pipe() // the command, fd 6
	if err != nil {
		return undo(err)
	}
	fail = append(fail, cr, cw)
	rr, rw, err := readyPair() // the wrapper's ready, fd 7
	if err != nil {
		return undo(err)
	}
	fail = append(fail, rr, rw)
	sf, err := seccompPipe(s.filter)
	if err != nil {
		return undo(err)
	}
	fail = append(fail, sf)
	gt, err := newGate()
	if err != nil {
		return undo(err)
	}
	defer gt.closeInfo()
	cmd.ExtraFiles = []*os.File{lw, gt.infoW, gt.blockR, cr, rw, sf}
	if niced {
		err = s.spawner.start(cmd)
	} else {
		err = cmd.Start()
	}
	lw.Close()
	cr.Close()
	rw.Close()
	sf.Close()
	gt.started()
	pid1 := 0
	if err == nil {
		if pid1, err = s.limit(ctx, cmd, gt, l, g); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	if err != nil {
		gt.blockW.Close()
		return undo(err)
	}
	p := &spare{
		run:    &Run{Cmd: cmd, left: lr, block: gt.blockW, group: g, proxy: sess},
		cancel: cancel, cmdW: cw, out: o,
	}
	// The wrapper says it waits for its command; EOF: the sandbox
	// failed, which the command's status and output will tell.
	_ = rr.SetReadDeadline(time.Now().Add(30 * time.Second))
	ready, wrapperPid := readReady(rr)
	if ioDir != "" && ready {
		p.ctl, p.helperPid, p.pid1 = rr, wrapperPid, pid1
	} else {
		rr.Close()
	}
	p.ready = ready
	if p.ready && pid1 > 0 {
		if err := checkProcesses(wrapperPid, l.Processes); err != nil {
			// Not served: the command would run without its process
			// limit.
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			gt.blockW.Close()
			return undo(err)
		}
	}
	if fi, err := os.Stat(home); err == nil && beforeErr == nil && os.SameFile(before, fi) {
		p.home = fi
	}
	return p, nil
}

// claim gives spare p its command.
func (s *Sandbox) claim(ctx context.Context, p *spare, spec Spec, out io.Writer, waitDelay time.Duration) (*Run, error) {
	r := p.run
	l := s.cfg.Limits
	fz := ""
	if spec.FileBytes > 0 && spec.FileBytes < l.FileBytes {
		n := max(spec.FileBytes&^1023, 1024)
		fz = strconv.FormatInt(n, 10)
		r.fileBytes, r.fileWhy = n, spec.FileWhy
	}
	r.Cmd.WaitDelay = waitDelay
	p.out.set(out)
	r.unbind = context.AfterFunc(ctx, p.cancel)
	r.cancel = p.cancel
	if r.proxy != nil {
		sess := r.proxy
		r.stop = context.AfterFunc(ctx, func() { _ = sess.close() })
	}
	if spec.Ready != nil {
		spec.Ready(r)
	}
	// EPIPE: the sandbox is gone, as Wait will say.
	_, _ = io.WriteString(p.cmdW, fz+"\n"+spec.Command+"\n")
	p.cmdW.Close()
	return r, nil
}

// limit sets the command's rlimits on the sandbox's pid 1, waiting for
// bwrap to make it, moves bwrap and pid 1 into the command's cgroup g
// on cgroup v1 (v2 cloned bwrap into it) and makes both the kernel's
// first choice to kill when memory runs out, and lets pid 1 start the
// command: every process of the command is born in its cgroup. (Moving
// them from here spares every sandbox a shell that joins and then execs
// bwrap: bwrap's own few pages, made before the move, stay charged
// where the worker is.) Until it returns,
// pid 1 waits: a failure (bwrap could not make the sandbox; the limits
// cannot be set) kills it before the command starts: bwrap's own
// failures are reported as the command's output and status. A root worker's
// command makes its user namespace of its own below pid 1, and a
// process limit set before it would bound every sandbox together
// (kernel ucounts count a namespace's processes against the limit its
// creator had): the wrapper sets that one, after.
func (s *Sandbox) limit(ctx context.Context, cmd *exec.Cmd, gt *gate, l Limits, g *cgroup.Group) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	pid, err := gt.pid1(deadline)
	if err != nil {
		// bwrap failed (its message is in the output, its status is
		// the command's) or did not make the sandbox in time: it is
		// killed, and block stays open until End, so that pid 1 cannot
		// read its end as a go.
		_ = cmd.Process.Kill()
		return 0, nil
	}
	if err := setLimits(pid, l, !s.root); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return 0, err
	}
	for _, p := range []int{cmd.Process.Pid, pid} {
		_ = os.WriteFile("/proc/"+strconv.Itoa(p)+"/oom_score_adj", []byte("1000"), 0)
		for _, procs := range g.Procs() {
			if err := os.WriteFile(procs, []byte(strconv.Itoa(p)), 0); err != nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				return 0, fmt.Errorf("sandbox: cannot join the command's cgroup %s: %w", procs, err)
			}
		}
	}
	// Raising a process's niceness needs only its user; where it fails,
	// the command runs at the worker's.
	_ = unix.Setpriority(unix.PRIO_PROCESS, pid, Nice)
	return pid, gt.release()
}

// Throttle holds the command's processes to cores of CPU (0: back to
// its limit) through its cgroup: the kernel keeps them to it however late
// the worker is to look at them again. Without a cgroup per command (or
// its cpu controller) it says cgroup.ErrNoCPU.
func (r *Run) Throttle(cores float64) error { return r.group.SetCPU(cores) }

// Tree is the pid of the process every process of the command descends
// from (the sandbox's outermost bwrap: the sandbox's pid namespace is
// its child, and an orphan in it is re-parented to that namespace's
// init), where the command has no cgroup of its own; 0 where it has one
// (its cgroup holds and paces it) or the home's helper runs it.
func (r *Run) Tree() int {
	if r.group != nil || r.Cmd == nil || r.Cmd.Process == nil {
		return 0
	}
	return r.Cmd.Process.Pid
}

// Wait waits for the command to end and its output to be passed on.
func (r *Run) Wait() error {
	if r.hr != nil {
		return r.hr.wait()
	}
	return r.Cmd.Wait()
}

// Status is how the command ended, after Wait, as the package's Status
// reads it (ok false: not known, Wait failed).
func (r *Run) Status() (code int, sig syscall.Signal, ok bool) {
	if r.hr != nil {
		code, sig = r.hr.status()
		return code, sig, true
	}
	if r.Cmd.ProcessState == nil {
		return 0, 0, false
	}
	code, sig = Status(r.Cmd.ProcessState)
	return code, sig, true
}

// End is how a command ended, beyond its status.
type End struct {
	// Leftovers: the command left processes running (they were killed
	// with the sandbox).
	Leftovers bool
	// OOMKills are the command's processes the kernel's out-of-memory
	// killer killed, as its cgroup counted them (0 without cgroups).
	OOMKills int
	// Failcnt is how often the command's cgroup hit its memory limit.
	Failcnt int
	// MemoryPeak is the most memory the command held (0: not known).
	MemoryPeak int64
	// FileBytes and FileWhy are the command's own file size limit and
	// why, when its Spec lowered it (0: Limits.FileBytes).
	FileBytes int64
	FileWhy   string
}

// End, called once after r.Cmd.Wait, reports how the command ended and
// releases it: its connections and tunnels through the egress proxy are
// closed, every process left in its cgroup is killed and the cgroup
// handed to its Manager for removal (Manager.Close waits for it).
func (r *Run) End() (End, error) {
	if r.hr != nil {
		return r.hr.end(r)
	}
	if r.proxy != nil {
		if r.stop != nil {
			r.stop()
		}
		_ = r.proxy.close()
	}
	if r.unbind != nil {
		r.unbind()
	}
	if r.cancel != nil {
		r.cancel()
	}
	if r.refill != nil {
		defer r.refill()
	}
	defer r.left.Close()
	r.block.Close()
	_ = r.left.SetReadDeadline(time.Now().Add(time.Second))
	b := make([]byte, 8)
	n, _ := io.ReadFull(r.left, b[:4])
	e := End{Leftovers: n == 4 && string(b[:4]) == "left", FileBytes: r.fileBytes, FileWhy: r.fileWhy}
	if r.group == nil {
		return e, nil
	}
	// Once bwrap has ended, its pid namespace is empty: whatever the
	// group still lists is dying, or escaped the namespace. Close kills
	// it and removes the group in the background, off the call's path.
	st := r.group.Stats()
	e.OOMKills, e.Failcnt, e.MemoryPeak = st.OOMKills, st.Failcnt, st.Peak
	return e, r.group.Close()
}

// Status reads a finished command's status: bwrap reports a command killed
// by signal n as exit status 128+n, as shells do, so such a status is
// read as that signal (sig 0: none).
func Status(ps *os.ProcessState) (code int, sig syscall.Signal) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal()
	}
	code = ps.ExitCode()
	if code > 128 && code < 128+65 {
		return code, syscall.Signal(code - 128)
	}
	return code, 0
}

// Check runs a trivial command in a sandbox and says what is missing
// when it fails.
func (s *Sandbox) Check(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "sandbox-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if s.root {
		if err := os.Chown(dir, s.cfg.UID, s.cfg.GID); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out strings.Builder
	probe := `test -w . && echo sandbox-ok`
	if s.proxy != nil {
		probe = `test -S ` + proxySocket + ` && ` + probe
	}
	r, err := s.start(ctx, Spec{Home: dir, Shell: "/bin/sh", Command: probe, Env: []string{"PATH=/usr/bin:/bin"}}, &out, time.Second, false)
	if err != nil {
		return fmt.Errorf("sandbox: starting %s: %w; %s", s.bwrap, err, Install)
	}
	werr := r.Wait()
	if _, err := r.End(); err != nil {
		return err
	}
	if werr != nil || !strings.Contains(out.String(), "sandbox-ok") {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 500 {
			msg = msg[:500]
		}
		return fmt.Errorf("sandbox: %s cannot make a sandbox (%v: %q); %s", s.bwrap, werr, msg, Install)
	}
	return nil
}

// splitLocale takes the locale variables (LANG, LANGUAGE, LC_*) out of
// env: the wrapper exports them for the command. A name the shell's
// export would refuse (and exit on) stays in env.
func splitLocale(env []string) (rest, locale []string) {
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if (name == "LANG" || name == "LANGUAGE" || strings.HasPrefix(name, "LC_")) && shellName.MatchString(name) {
			locale = append(locale, kv)
		} else {
			rest = append(rest, kv)
		}
	}
	return rest, locale
}

// shellName is a name a POSIX shell takes for a variable.
var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
