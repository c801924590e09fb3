package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbull/toolruntime/internal/mountinfo"
)

// Prefix begins the name of every cgroup a Manager makes; the worker's
// pid and a sequence number follow.
const Prefix = "toolruntime-"

// Limits bound one group. A zero field is not set.
type Limits struct {
	// MemoryBytes is memory.max (v2) or memory.limit_in_bytes (v1): all
	// the memory the group's processes hold or charge, tmpfs and shared
	// memory included. Swap is refused (memory.swap.max 0, or memsw equal
	// to it) where the kernel accounts it.
	MemoryBytes int64
	// Pids is pids.max: the group's processes and threads at once.
	Pids int
	// CPU is the group's CPU bandwidth in cores (cpu.max or
	// cpu.cfs_quota_us over a 100 ms period).
	CPU float64
}

// Options configure Open.
type Options struct {
	// Root is "auto" (the worker's own cgroup, as /proc/self/cgroup says)
	// or the path of a directory on a cgroup file system (v2, or v1's
	// memory hierarchy: the same relative path is used on the pids and
	// cpu hierarchies when they exist).
	Root string
	// WorkerMemoryMin is memory.min of the worker's own leaf (v2 only):
	// memory reclaim and the out-of-memory killer leave it that much.
	WorkerMemoryMin int64
	// Logger logs a group that could not be removed (default
	// slog.Default()).
	Logger *slog.Logger
	// RemoveWithin bounds how long the removal of one group is retried
	// in the background (0: DefaultRemoveWithin).
	RemoveWithin time.Duration

	// anyControllers lets a v2 root without the memory controller be
	// used (tests on a host whose v2 hierarchy has no controllers).
	anyControllers bool
}

// DefaultRemoveWithin bounds the background removal of one group.
const DefaultRemoveWithin = 30 * time.Second

// Manager makes the groups of commands beneath one subtree; it is safe
// for concurrent use. Close finishes the removals under way.
type Manager struct {
	v2          bool
	parents     map[string]string // controller → parent directory; v2: "" → the one parent
	controllers []string          // in use: memory, pids, cpu
	seq         atomic.Uint64
	prefix      string
	log         *slog.Logger
	within      time.Duration

	// removals are the groups being removed in the background; once
	// closing, groups are removed by the caller of Group.Close.
	rmMu     sync.Mutex
	removals sync.WaitGroup
	closing  bool
	failed   []*Group // removals that gave up, tried again by Close
}

// Version is 1 or 2.
func (m *Manager) Version() int {
	if m.v2 {
		return 2
	}
	return 1
}

// Controllers are the controllers in use.
func (m *Manager) Controllers() []string { return m.controllers }

// Parent is the directory beneath which groups are made (v1: the memory
// hierarchy's).
func (m *Manager) Parent() string {
	if m.v2 {
		return m.parents[""]
	}
	return m.parents["memory"]
}

// mount is a cgroup mount of /proc/self/mountinfo.
type mount struct {
	root, point string
	v2          bool
	opts        []string // v1: the controllers
}

func mounts() ([]mount, error) {
	all, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	var ms []mount
	for _, x := range all {
		m := mount{root: x.Root, point: x.Point}
		switch x.FSType {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			m.opts = strings.Split(x.SuperOpts, ",")
		default:
			continue
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// own reads /proc/self/cgroup: controller → path ("" for v2's).
func own() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	paths := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			paths[""] = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			paths[c] = f[2]
		}
	}
	return paths, nil
}

// dirOf is the directory of cgroup path p on mount m ("" when m does not
// show it).
func dirOf(m mount, p string) string {
	rel, err := filepath.Rel(m.root, p)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return ""
	}
	return filepath.Join(m.point, rel)
}

func writable(dir string) bool {
	return syscall.Access(dir, 2 /* W_OK */) == nil
}

// Open finds the subtree and prepares it. Its error says, in one
// sentence, why no subtree can be used; the caller then falls back to
// rlimits.
func Open(o Options) (*Manager, error) {
	ms, err := mounts()
	if err != nil {
		return nil, fmt.Errorf("cgroup: reading the mounts: %w", err)
	}
	m := &Manager{parents: map[string]string{}, prefix: fmt.Sprintf("%s%d-", Prefix, os.Getpid()), log: o.Logger, within: o.RemoveWithin}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.within <= 0 {
		m.within = DefaultRemoveWithin
	}
	if o.Root == "" || o.Root == "auto" {
		err = m.auto(ms, o)
	} else {
		err = m.explicit(ms, o)
	}
	if err != nil {
		return nil, err
	}
	m.sweep()
	return m, nil
}

func (m *Manager) auto(ms []mount, o Options) error {
	paths, err := own()
	if err != nil {
		return fmt.Errorf("cgroup: reading /proc/self/cgroup: %w", err)
	}
	var why []string
	if p, ok := paths[""]; ok {
		for _, mt := range ms {
			if !mt.v2 {
				continue
			}
			if d := dirOf(mt, p); d != "" {
				err := m.openV2(d, o)
				if err == nil {
					return nil
				}
				why = append(why, err.Error())
				break
			}
		}
	}
	v1 := map[string]string{}
	for _, c := range []string{"memory", "pids", "cpu"} {
		p, ok := paths[c]
		if !ok {
			continue
		}
		for _, mt := range ms {
			if !mt.v2 && contains(mt.opts, c) {
				if d := dirOf(mt, p); d != "" {
					v1[c] = d
				}
			}
		}
	}
	if err := m.openV1(v1); err != nil {
		why = append(why, err.Error())
		return errors.New(strings.Join(why, "; "))
	}
	return nil
}

func (m *Manager) explicit(ms []mount, o Options) error {
	root := filepath.Clean(o.Root)
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return m.openV2(root, o)
	}
	// v1: find root's mount, and the same path on the other controllers'.
	var rel string
	found := false
	for _, mt := range ms {
		if mt.v2 || !contains(mt.opts, "memory") {
			continue
		}
		if r, err := filepath.Rel(mt.point, root); err == nil && (filepath.IsLocal(r) || r == ".") {
			rel, found = filepath.Join(mt.root, r), true
		}
	}
	if !found {
		return fmt.Errorf("cgroup: --cgroup-root %s is neither a cgroup v2 directory nor in the cgroup v1 memory hierarchy", root)
	}
	v1 := map[string]string{}
	for _, c := range []string{"memory", "pids", "cpu"} {
		for _, mt := range ms {
			if !mt.v2 && contains(mt.opts, c) {
				if d := dirOf(mt, rel); d != "" {
					v1[c] = d
				}
			}
		}
	}
	return m.openV1(v1)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (m *Manager) openV1(dirs map[string]string) error {
	mem, ok := dirs["memory"]
	if !ok {
		return errors.New("cgroup: no cgroup v1 memory hierarchy")
	}
	if !writable(mem) {
		return fmt.Errorf("cgroup: the worker's cgroup v1 memory cgroup %s is not writable by uid %d (delegate it: chown it to the worker's user)", mem, os.Geteuid())
	}
	m.parents["memory"] = mem
	m.controllers = []string{"memory"}
	for _, c := range []string{"pids", "cpu"} {
		if d, ok := dirs[c]; ok && writable(d) {
			m.parents[c] = d
			m.controllers = append(m.controllers, c)
		}
	}
	return nil
}

func (m *Manager) openV2(dir string, o Options) error {
	if !writable(dir) {
		return fmt.Errorf("cgroup: the worker's cgroup v2 cgroup %s is not writable by uid %d (no delegation: systemd Delegate=yes, or a container with a private, writable cgroup namespace)", dir, os.Geteuid())
	}
	avail := strings.Fields(readString(filepath.Join(dir, "cgroup.controllers")))
	if !o.anyControllers && (!contains(avail, "memory") || !contains(avail, "pids")) {
		return fmt.Errorf("cgroup: the worker's cgroup v2 cgroup %s lacks the memory or pids controller (it has %q)", dir, avail)
	}
	// No internal processes: the worker (and whatever else is in its
	// cgroup, e.g. an init) moves to a leaf before the controllers are
	// enabled for the children.
	leaf := filepath.Join(dir, "worker")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cgroup: %w", err)
	}
	for _, pid := range pids(filepath.Join(dir, "cgroup.procs")) {
		if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(pid)); err != nil && pid == os.Getpid() {
			return fmt.Errorf("cgroup: moving the worker to its leaf %s: %w", leaf, err)
		}
	}
	var on []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		if contains(avail, c) {
			if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c); err != nil {
				if c != "cpu" {
					return fmt.Errorf("cgroup: enabling %s in %s (a process left in it?): %w", c, dir, err)
				}
				continue
			}
			on = append(on, c)
		}
	}
	if o.WorkerMemoryMin > 0 && contains(on, "memory") {
		_ = writeFile(filepath.Join(leaf, "memory.min"), strconv.FormatInt(o.WorkerMemoryMin, 10))
	}
	m.v2 = true
	m.parents[""] = dir
	m.controllers = on
	return nil
}

func readString(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

func writeFile(p, s string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	return errors.Join(err, f.Close())
}

// pids reads a cgroup.procs file.
func pids(p string) []int {
	var out []int
	for _, f := range strings.Fields(readString(p)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// sweep removes the groups of workers that are gone.
func (m *Manager) sweep() {
	for _, parent := range m.parents {
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			rest, ok := strings.CutPrefix(e.Name(), Prefix)
			if !ok || !e.IsDir() {
				continue
			}
			pid, _, _ := strings.Cut(rest, "-")
			n, err := strconv.Atoi(pid)
			if err != nil || n == os.Getpid() || syscall.Kill(n, 0) == nil {
				continue
			}
			g := &Group{m: m, dirs: []string{filepath.Join(parent, e.Name())}}
			g.Kill()
			_ = g.remove(5 * time.Second)
		}
	}
}

// Group is one command's cgroup (one directory per hierarchy on v1).
type Group struct {
	m    *Manager
	dirs []string // the memory (v2: the only) directory first
	fd   *os.File // v2: the directory, for CLONE_INTO_CGROUP
	cpu  float64  // the CPU bandwidth New set (0: none)
}

// ErrNoCPU says that a group's CPU bandwidth cannot be set: the cpu
// controller is not delegated to the worker.
var ErrNoCPU = errors.New("cgroup: no cpu controller")

// SetCPU sets the group's CPU bandwidth to cores while its processes run
// (the kernel holds them to it, however busy the worker is), a
// thousandth of a core at least; 0 sets back what New set. A nil group, or one without the cpu controller, says
// ErrNoCPU.
func (g *Group) SetCPU(cores float64) error {
	if g == nil || !contains(g.m.controllers, "cpu") {
		return ErrNoCPU
	}
	if cores <= 0 {
		cores = g.cpu
	}
	// A short period: a group held to a tenth of a core runs at most a
	// millisecond at a time, not ten; below a tenth, a millisecond in a
	// longer period (a second at most).
	period := 10000
	quota := "max"
	if cores > 0 {
		q := int(cores * float64(period))
		if q < 1000 {
			q, period = 1000, min(int(1000/cores), 1000000)
		}
		quota = strconv.Itoa(q)
	}
	if g.m.v2 {
		return writeFile(filepath.Join(g.dirs[0], "cpu.max"), quota+" "+strconv.Itoa(period))
	}
	for i, c := range g.m.controllers {
		if c != "cpu" {
			continue
		}
		if quota == "max" {
			quota = "-1"
		}
		if err := writeFile(filepath.Join(g.dirs[i], "cpu.cfs_period_us"), strconv.Itoa(period)); err != nil {
			return err
		}
		return writeFile(filepath.Join(g.dirs[i], "cpu.cfs_quota_us"), quota)
	}
	return ErrNoCPU
}

// New makes a group with limits l.
func (m *Manager) New(l Limits) (*Group, error) {
	name := m.prefix + strconv.FormatUint(m.seq.Add(1), 10)
	g := &Group{m: m, cpu: l.CPU}
	var order []string
	if m.v2 {
		order = []string{""}
	} else {
		order = m.controllers
	}
	for _, c := range order {
		d := filepath.Join(m.parents[c], name)
		if err := os.Mkdir(d, 0o755); err != nil {
			_ = g.remove(time.Second)
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		g.dirs = append(g.dirs, d)
	}
	if err := g.limit(l); err != nil {
		_ = g.remove(time.Second)
		return nil, err
	}
	if m.v2 {
		fd, err := os.Open(g.dirs[0])
		if err != nil {
			_ = g.remove(time.Second)
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		g.fd = fd
	}
	return g, nil
}

func (g *Group) limit(l Limits) error {
	var errs []error
	set := func(dir, file, v string, optional bool) {
		if err := writeFile(filepath.Join(dir, file), v); err != nil && !(optional && errors.Is(err, fs.ErrNotExist)) {
			errs = append(errs, fmt.Errorf("cgroup: setting %s to %s: %w", file, v, err))
		}
	}
	period := 100000
	quota := strconv.Itoa(int(l.CPU * float64(period)))
	if g.m.v2 {
		d := g.dirs[0]
		has := func(c string) bool { return contains(g.m.controllers, c) }
		if has("memory") && l.MemoryBytes > 0 {
			set(d, "memory.max", strconv.FormatInt(l.MemoryBytes, 10), false)
			set(d, "memory.swap.max", "0", true)
			set(d, "memory.oom.group", "1", true)
		}
		if has("pids") && l.Pids > 0 {
			set(d, "pids.max", strconv.Itoa(l.Pids), false)
		}
		if has("cpu") && l.CPU > 0 {
			set(d, "cpu.max", quota+" "+strconv.Itoa(period), false)
		}
		return errors.Join(errs...)
	}
	for i, c := range g.m.controllers {
		d := g.dirs[i]
		switch {
		case c == "memory" && l.MemoryBytes > 0:
			v := strconv.FormatInt(l.MemoryBytes, 10)
			set(d, "memory.limit_in_bytes", v, false)
			set(d, "memory.memsw.limit_in_bytes", v, true)
		case c == "pids" && l.Pids > 0:
			set(d, "pids.max", strconv.Itoa(l.Pids), false)
		case c == "cpu" && l.CPU > 0:
			set(d, "cpu.cfs_period_us", strconv.Itoa(period), false)
			set(d, "cpu.cfs_quota_us", quota, false)
		}
	}
	return errors.Join(errs...)
}

// FD is the group's directory for SysProcAttr.CgroupFD (v2), or nil: the
// first process then joins with Procs.
func (g *Group) FD() *os.File {
	if g == nil {
		return nil
	}
	return g.fd
}

// Procs are the cgroup.procs files a process joins g by, writing its pid
// to each (v1; none on v2, nor for a nil g).
func (g *Group) Procs() []string {
	if g == nil || g.m.v2 {
		return nil
	}
	ps := make([]string, len(g.dirs))
	for i, d := range g.dirs {
		ps[i] = filepath.Join(d, "cgroup.procs")
	}
	return ps
}

// Dir is the group's (memory) directory.
func (g *Group) Dir() string { return g.dirs[0] }

// Kill kills every process of the group, and returns how many it found.
// A nil group has none.
func (g *Group) Kill() int {
	if g == nil {
		return 0
	}
	if g.m != nil && g.m.v2 {
		n := len(pids(filepath.Join(g.dirs[0], "cgroup.procs")))
		if writeFile(filepath.Join(g.dirs[0], "cgroup.kill"), "1") == nil {
			return n
		}
	}
	// v1 (or v2 before 5.14): kill what is listed until nothing is; the
	// pids limit bounds how many can be forked meanwhile.
	seen := map[int]bool{}
	for i := 0; i < 500; i++ {
		left := false
		for _, d := range g.dirs {
			for _, p := range pids(filepath.Join(d, "cgroup.procs")) {
				left = true
				seen[p] = true
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if !left {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	return len(seen)
}

// Stats are what a group's memory controller counted.
type Stats struct {
	// OOMKills are the processes the kernel's out-of-memory killer killed
	// in the group.
	OOMKills int
	// Failcnt is how often the group hit its memory limit (v1's
	// memory.failcnt, v2's "max" of memory.events).
	Failcnt int
	// Peak is the most memory the group held (0: not known).
	Peak int64
}

// Stats reads the group's memory counters.
func (g *Group) Stats() Stats {
	var s Stats
	d := g.dirs[0]
	field := func(file, key string) int {
		for _, l := range strings.Split(readString(filepath.Join(d, file)), "\n") {
			if k, v, ok := strings.Cut(l, " "); ok && k == key {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		return 0
	}
	if g.m.v2 {
		s.OOMKills = field("memory.events", "oom_kill")
		s.Failcnt = field("memory.events", "max")
		s.Peak, _ = strconv.ParseInt(readString(filepath.Join(d, "memory.peak")), 10, 64)
		return s
	}
	s.OOMKills = field("memory.oom_control", "oom_kill")
	// With swap accounted, memsw's counter is charged (and fails) first.
	for _, f := range []string{"memory.failcnt", "memory.memsw.failcnt"} {
		n, _ := strconv.Atoi(readString(filepath.Join(d, f)))
		s.Failcnt = max(s.Failcnt, n)
	}
	s.Peak, _ = strconv.ParseInt(readString(filepath.Join(d, "memory.max_usage_in_bytes")), 10, 64)
	return s
}

// Close kills what is left in the group and has it removed: the kill
// (SIGKILL to every process it lists) is done before Close returns, the
// removal, which waits for the killed processes to leave the group, in
// the background, retried for up to Options.RemoveWithin; Manager.Close
// waits for it. After Manager.Close, Close removes the group itself and
// its error says the group could not be removed.
func (g *Group) Close() error {
	if g == nil {
		return nil
	}
	g.signal()
	if g.fd != nil {
		g.fd.Close()
	}
	m := g.m
	m.rmMu.Lock()
	if m.closing {
		m.rmMu.Unlock()
		g.Kill()
		return g.remove(m.within)
	}
	m.removals.Add(1)
	m.rmMu.Unlock()
	go func() {
		defer m.removals.Done()
		if err := g.remove(m.within); err != nil {
			m.log.Warn("cgroup: a command's cgroup is not removed yet; the worker tries again when it stops", "err", err)
			m.rmMu.Lock()
			m.failed = append(m.failed, g)
			m.rmMu.Unlock()
		}
	}()
	return nil
}

// signal sends SIGKILL once to every process the group lists.
func (g *Group) signal() {
	if g.m.v2 && writeFile(filepath.Join(g.dirs[0], "cgroup.kill"), "1") == nil {
		return
	}
	for _, d := range g.dirs {
		for _, p := range pids(filepath.Join(d, "cgroup.procs")) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// Close waits for the removals under way, tries once more those that
// gave up, and from then on has Group.Close remove groups before it
// returns. Its error names the groups that are left (the next start's
// sweep removes them).
func (m *Manager) Close() error {
	m.rmMu.Lock()
	m.closing = true
	m.rmMu.Unlock()
	m.removals.Wait()
	m.rmMu.Lock()
	failed := m.failed
	m.failed = nil
	m.rmMu.Unlock()
	var errs []error
	for _, g := range failed {
		g.Kill()
		errs = append(errs, g.remove(time.Second))
	}
	return errors.Join(errs...)
}

// remove removes the group's directories, waiting up to within for the
// killed processes to leave them (killing again now and then), with
// waits that double from 1 ms to 250 ms.
func (g *Group) remove(within time.Duration) error {
	var errs []error
	deadline := time.Now().Add(within)
	for _, d := range g.dirs {
		var err error
		wait := time.Millisecond
		for i := 0; ; i++ {
			err = os.Remove(d)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				err = nil
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				break
			}
			if i%8 == 7 {
				g.signal()
			}
			time.Sleep(wait)
			wait = min(2*wait, 250*time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup: removing %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// Command makes cmd start in g, as the kernel's first choice to kill when
// memory runs out: cmd is run by a small shell that raises its
// oom_score_adj to 1000 (its children inherit it), joins g on cgroup v1
// (it writes its pid to each cgroup.procs file of g; on v2 it is cloned
// into g), and execs cmd's program. A nil g only raises the score. cmd's
// program must be resolved (exec.Command does it); a cmd whose lookup
// failed is left as it is, and fails to start with its error.
func (g *Group) Command(cmd *exec.Cmd) {
	if cmd.Err != nil || cmd.Path == "" {
		return
	}
	args := []string{"/bin/sh", "-c", joinScript, "cgroup-join"}
	if g != nil {
		args = append(args, g.Procs()...)
	}
	args = append(args, "--", cmd.Path)
	cmd.Args = append(args, cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
	if fd := g.FD(); fd != nil {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cloneInto(cmd.SysProcAttr, fd)
	}
}

// joinScript is Command's shell: the cgroup.procs files to join, "--",
// then the program and its arguments.
const joinScript = `echo 1000 >/proc/self/oom_score_adj 2>/dev/null
while [ "$1" != -- ]; do
  echo $$ >"$1" || { echo "cgroup: cannot join the cgroup $1" >&2; exit 125; }
  shift
done
shift
exec "$@"
`

// Protect makes the kernel's out-of-memory killer spare the worker:
// its own oom_score_adj is lowered to adj when that is permitted (root,
// or CAP_SYS_RESOURCE). Commands raise theirs to 1000 when they start.
func Protect(adj int) error {
	return writeFile("/proc/self/oom_score_adj", strconv.Itoa(adj))
}
