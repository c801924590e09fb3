package computer_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/netguard"
	"github.com/agentbull/toolruntime/internal/sandbox"
)

// The escapes of issue 13, each tried as an attacker would through
// run_command. Each of these succeeded before commands ran in a sandbox.

const secret = "nats-token-6f1c2b9e"

// sandboxed is a category whose commands run in a sandbox made with cfg.
func sandboxed(t *testing.T, cfg sandbox.Config) *computer.Category {
	t.Helper()
	needSandbox(t)
	if reflect.ValueOf(cfg).IsZero() {
		return newCategory(t, computer.Config{Sandbox: sharedSandbox(t)})
	}
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return newCategory(t, computer.Config{Sandbox: sb})
}

// probe runs command through run_command and returns what the model
// would read.
func probe(t *testing.T, c *computer.Category, command string) string {
	t.Helper()
	res, err := run(t, c, computer.RunCommandName, map[string]any{"command": command})
	if err != nil {
		return res.Content + "\nerror: " + err.Error()
	}
	return res.Content
}

func TestEscapes(t *testing.T) {
	t.Setenv("NATS_TOKEN", secret)
	c := sandboxed(t, sandbox.Config{})
	h := home(t, c, agent)
	other := home(t, c, "a2")
	writeFile(t, filepath.Join(other, "secret.txt"), "other agent's "+secret)
	self, _ := os.Executable()
	// The environment this process started with is what /proc shows of
	// it (t.Setenv changes only Go's copy): none of it may reach a
	// command, but for what a command gets anyway.
	var startEnv []string
	if b, err := os.ReadFile("/proc/self/environ"); err == nil {
		for _, kv := range strings.Split(string(b), "\x00") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "PATH", "HOME", "LANG", "TMPDIR", "PWD", "OLDPWD", "SHLVL", "_", "TERM", "USER", "LOGNAME", "SHELL":
				continue
			}
			if len(v) >= 6 {
				startEnv = append(startEnv, kv)
			}
		}
	}
	if len(startEnv) == 0 {
		t.Fatal("this process started with no environment to look for")
	}
	withEnv := append([]string{secret}, startEnv...)
	tests := []struct {
		name    string
		command string
		absent  []string // nothing of these may show
		want    []string
	}{
		{"the parent's environment", `tr '\0' '\n' < /proc/$PPID/environ; echo`, withEnv, nil},
		{"pid 1's environment", `tr '\0' '\n' < /proc/1/environ; echo`, withEnv, nil},
		{"every environment", `cat /proc/[0-9]*/environ | tr '\0' '\n'`, withEnv, nil},
		{"the worker in ps", `ps -eo pid,args`, []string{self, filepath.Base(self)}, []string{"ps -eo"}},
		{"the worker's pid", fmt.Sprintf(`ls /proc/%d && cat /proc/%d/cmdline`, os.Getpid(), os.Getpid()), []string{self}, nil},
		{"the environment itself", `env`, withEnv, nil},
		{"a sibling's home, relatively", `cat ../a2/secret.txt`, []string{secret}, []string{"No such file"}},
		{"a sibling's home, absolutely", `cat ` + other + `/secret.txt`, []string{secret}, []string{"No such file"}},
		{"the homes' root", `ls -a ..; ls -a ` + c.Root(), []string{"a2"}, []string{"a1"}},
		{"a link to a sibling", `ln -s ../a2 sib; cat sib/secret.txt`, []string{secret}, nil},
		{"a search of the disk", `grep -rs ` + secret + ` /etc /tmp /run /var /root /home /work /opt ` + filepath.Dir(filepath.Dir(c.Root())) + ` 2>/dev/null; echo searched`, []string{"other agent's"}, []string{"searched"}},
		{"credentials in /etc", `cat /etc/shadow; ls /etc`, []string{"root:"}, []string{"passwd"}},
		{"privileges", `grep -E '^(NoNewPrivs|Seccomp|CapEff|CapPrm|CapBnd):' /proc/self/status`, nil,
			[]string{"NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000"}},
		{"setuid", `ls -l /usr/bin/su /bin/su 2>/dev/null | head -1; su -c id root </dev/null 2>&1; id -u`, []string{"uid=0(root) gid=0(root)"}, nil},
		{"the hostname", `hostname`, nil, []string{"sandbox\n"}},
		{"devices", `ls /dev`, []string{"sda", "vda", "mem", "kmsg"}, []string{"null"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := probe(t, c, tt.command)
			for _, a := range tt.absent {
				if a != "" && strings.Contains(out, a) {
					t.Errorf("the command reached %q:\n%s", a, out)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	_ = h
}

// Nothing outside the home can be written; what the command tried is
// checked on the host.
func TestWritesOutsideTheHome(t *testing.T) {
	c := sandboxed(t, sandbox.Config{})
	h := home(t, c, agent)
	other := home(t, c, "a2")
	tag := marker()
	targets := []string{
		"/usr/" + tag, "/usr/bin/" + tag, "/etc/" + tag, "/" + tag, "/var/" + tag, "/root/" + tag,
		filepath.Join(c.Root(), tag), filepath.Join(other, tag), filepath.Join(filepath.Dir(c.Root()), tag),
	}
	for _, target := range targets {
		out := probe(t, c, fmt.Sprintf(`touch %[1]s; echo x > %[1]s; mkdir -p %[1]s.d; ln -s /x %[1]s.l; echo tried`, target))
		if !strings.Contains(out, "tried") {
			t.Errorf("%s: %s", target, out)
		}
		for _, p := range []string{target, target + ".d", target + ".l"} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("the command created %s on the host", p)
				os.RemoveAll(p)
			}
		}
	}
	// A hard link to a file outside the home cannot be made either: the
	// sandbox sees no such file on the home's mount.
	out := probe(t, c, `ln /etc/passwd pw 2>&1; ln /usr/bin/env env 2>&1; echo tried`)
	for _, p := range []string{"pw", "env"} {
		if _, err := os.Lstat(filepath.Join(h, p)); err == nil {
			t.Errorf("hard link %s made:\n%s", p, out)
		}
	}
	// The home itself is writable, and /tmp, which is private.
	out = probe(t, c, `echo ok > mine && cat mine && echo t > /tmp/`+tag+` && cat /tmp/`+tag)
	if out != "ok\nt\n[exit status 0]" {
		t.Errorf("home and /tmp: %q", out)
	}
	if _, err := os.Stat("/tmp/" + tag); err == nil {
		t.Error("the command's /tmp is the host's")
	}
}

// The worker's process cannot be signalled: it does not exist in the
// sandbox's pid namespace.
func TestCannotKillTheWorker(t *testing.T) {
	c := sandboxed(t, sandbox.Config{})
	out := probe(t, c, fmt.Sprintf(`kill -9 %d; kill -9 $PPID; kill -9 1; kill -9 -1; echo tried`, os.Getpid()))
	if !strings.Contains(out, "No such process") {
		t.Errorf("the worker's pid is visible:\n%s", out)
	}
	// Still here, and the next command runs.
	if out := probe(t, c, `echo alive`); !strings.Contains(out, "alive") {
		t.Errorf("after kill: %s", out)
	}
}

// listener is a server on the host's loopback that counts connections.
type listener struct {
	addr  string
	port  int
	conns atomic.Int64
}

func listen(t *testing.T) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{addr: ln.Addr().String(), port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "host-loopback-reached") }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				l.conns.Add(1)
			}
		},
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return l
}

// Network probes in bash (its /dev/tcp needs no other tool): a direct
// connection, and requests through the proxy at $HTTP_PROXY.
const (
	direct     = `bash -c 'exec 3<>/dev/tcp/%s/%d && printf "GET / HTTP/1.0\r\n\r\n" >&3 && cat <&3' 2>&1; echo "direct done"`
	viaProxy   = `bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128 && printf "GET http://%s/ HTTP/1.0\r\nHost: %s\r\n\r\n" >&3 && cat <&3' 2>&1; echo "proxy done"`
	viaConnect = `bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128 && printf "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" >&3 && { read -r status <&3; echo "$status"; }' 2>&1; echo "connect done"`
)

func TestNetworkOff(t *testing.T) {
	c := sandboxed(t, sandbox.Config{})
	l := listen(t)
	for _, host := range []string{"127.0.0.1", "10.0.0.1", "169.254.169.254", "1.1.1.1"} {
		out := probe(t, c, fmt.Sprintf(direct, host, l.port))
		if strings.Contains(out, "host-loopback-reached") || !strings.Contains(out, "direct done") {
			t.Errorf("%s: %s", host, out)
		}
	}
	out := probe(t, c, `ls /sys/class/net 2>&1; cat /proc/net/dev; env | grep -i proxy; echo listed`)
	if strings.Contains(out, "eth") || strings.Contains(strings.ToLower(out), "proxy=") {
		t.Errorf("a network beyond loopback:\n%s", out)
	}
	if n := l.conns.Load(); n != 0 {
		t.Errorf("the host's loopback server got %d connections", n)
	}
}

// With the network on, egress goes through the worker's proxy, which
// applies web_fetch's policy: loopback, private and metadata addresses
// stay out of reach, directly and through the proxy, unless the
// allow-list names them.
func TestNetworkThroughTheProxy(t *testing.T) {
	l := listen(t)
	needSandbox(t)
	c := sandboxed(t, sandbox.Config{Network: true})
	env := probe(t, c, `env | sort`)
	for _, v := range []string{"HTTP_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128", "NO_PROXY=localhost"} {
		if !strings.Contains(env, v) {
			t.Errorf("environment lacks %s:\n%s", v, env)
		}
	}
	target := l.addr
	for _, tt := range []struct{ name, command, want string }{
		{"direct to the host's loopback", fmt.Sprintf(direct, "127.0.0.1", l.port), "direct done"},
		{"direct to a private address", fmt.Sprintf(direct, "10.0.0.1", 80), "direct done"},
		{"forward to loopback", fmt.Sprintf(viaProxy, target, target), "403 Forbidden"},
		{"forward to localhost", fmt.Sprintf(viaProxy, "localhost:"+strconv.Itoa(l.port), "localhost"), "403 Forbidden"},
		{"forward to metadata", fmt.Sprintf(viaProxy, "169.254.169.254", "169.254.169.254"), "403 Forbidden"},
		{"forward to a private address", fmt.Sprintf(viaProxy, "10.1.2.3:8080", "10.1.2.3"), "403 Forbidden"},
		{"forward to IPv4-mapped loopback", fmt.Sprintf(viaProxy, "[::ffff:127.0.0.1]:"+strconv.Itoa(l.port), "x"), "403 Forbidden"},
		{"tunnel to loopback", fmt.Sprintf(viaConnect, target, target), "403 Forbidden"},
		{"tunnel to metadata", fmt.Sprintf(viaConnect, "169.254.169.254:80", "x"), "403 Forbidden"},
		{"tunnel to a private address", fmt.Sprintf(viaConnect, "192.168.1.1:443", "x"), "403 Forbidden"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := probe(t, c, tt.command)
			if strings.Contains(out, "host-loopback-reached") || !strings.Contains(out, tt.want) {
				t.Errorf("%s", out)
			}
		})
	}
	if n := l.conns.Load(); n != 0 {
		t.Errorf("the host's loopback server got %d connections", n)
	}

	// The positive path: an allow-listed target (the operator's
	// --web-allow) is reached through the proxy, by forward and tunnel.
	allow, err := netguard.ParseAllow([]string{target})
	if err != nil {
		t.Fatal(err)
	}
	open := sandboxed(t, sandbox.Config{Network: true, Guard: netguard.New(allow, nil)})
	// The bridge (socat) and its connections are the sandbox's, not
	// processes the command left behind.
	if out := probe(t, open, fmt.Sprintf(viaProxy, target, target)); !strings.Contains(out, "host-loopback-reached") || strings.Contains(out, "left running") {
		t.Errorf("forward to an allowed target:\n%s", out)
	}
	if out := probe(t, open, fmt.Sprintf(viaConnect, target, target)); !strings.Contains(out, "200 Connection Established") {
		t.Errorf("tunnel to an allowed target:\n%s", out)
	}
	if out := probe(t, open, `curl -sS --noproxy '' --max-time 10 http://`+target+`/ 2>&1 || echo no curl`); !strings.Contains(out, "host-loopback-reached") && !strings.Contains(out, "no curl") {
		t.Errorf("curl through HTTP_PROXY:\n%s", out)
	}
	// Any other port of the same address stays closed.
	if out := probe(t, open, fmt.Sprintf(viaProxy, "127.0.0.1:1", "x")); !strings.Contains(out, "403 Forbidden") {
		t.Errorf("a port the allow-list does not name:\n%s", out)
	}
}

// Each limit stops a command that runs into it, and the answer says which.
func TestLimits(t *testing.T) {
	const procs = 64
	c := sandboxed(t, sandbox.Config{Limits: sandbox.Limits{Processes: procs, MemoryBytes: 256 << 20, CPUSeconds: 1, FileBytes: 1 << 20, OpenFiles: 64}})
	h := home(t, c, agent)
	t.Run("processes", func(t *testing.T) {
		m := marker()
		out := probe(t, c, `( for i in $(seq 2000); do sleep `+m+` & done ); n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo "procs $n"`)
		var n int
		if i := strings.Index(out, "procs "); i < 0 {
			t.Fatalf("no count:\n%s", out)
		} else if _, err := fmt.Sscanf(out[i:], "procs %d", &n); err != nil || n > procs || n < procs/2 {
			t.Errorf("%d processes ran, want at most %d:\n%s", n, procs, out)
		}
		if !strings.Contains(out, "probably the sandbox's process limit (at most 64") {
			t.Errorf("the answer does not name the limit:\n%s", out)
		}
		assertNoProcess(t, "a sleep of the fork loop", m)
	})
	t.Run("memory", func(t *testing.T) {
		out := probe(t, c, `dd if=/dev/zero of=/dev/null bs=512M count=1`)
		if !strings.Contains(out, "memory exhausted") || !strings.Contains(out, "probably the sandbox's memory limit (256 MiB") {
			t.Errorf("%s", out)
		}
	})
	t.Run("cpu", func(t *testing.T) {
		out := probe(t, c, `while :; do :; done`)
		if !strings.Contains(out, "CPU time limit: 1 s of CPU per process (SIGXCPU)") || !strings.Contains(out, "cpu time limit exceeded") && !strings.Contains(out, "[killed by signal") {
			t.Errorf("%s", out)
		}
	})
	t.Run("file size", func(t *testing.T) {
		out := probe(t, c, `head -c 5000000 /dev/zero > big`)
		if !strings.Contains(out, "file size limit: no file may grow beyond 1 MiB (SIGXFSZ)") {
			t.Errorf("%s", out)
		}
		if fi, err := os.Stat(filepath.Join(h, "big")); err != nil || fi.Size() > 1<<20 {
			t.Errorf("big: %v %v", fi, err)
		}
	})
	t.Run("open files", func(t *testing.T) {
		out := probe(t, c, `ulimit -n; i=0; while [ $i -lt 100 ]; do eval "exec $((i+10))</dev/null" || break; i=$((i+1)); done; echo opened $i`)
		if !strings.Contains(out, "64\n") || strings.Contains(out, "opened 100") {
			t.Errorf("%s", out)
		}
	})
	t.Run("tmp", func(t *testing.T) {
		// Without cgroups, each is fitted into a quarter of the command's
		// memory (512 MiB).
		out := probe(t, c, `df -k /tmp /dev/shm | tail -2`)
		if strings.Count(out, "tmpfs             131072 ") != 2 {
			t.Errorf("/tmp and /dev/shm are not 128 MiB tmpfs:\n%s", out)
		}
	})
	// After all that, a plain command still runs.
	if out := probe(t, c, `echo fine`); !strings.Contains(out, "fine\n[exit status 0]") {
		t.Errorf("%s", out)
	}
	_ = context.Background
}
