package computer_test

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/netguard"
	"github.com/agentbull/toolruntime/internal/sandbox"
)

// silent is an allowed upstream that accepts connections and never
// sends a byte; it counts the connections it got and those that were
// closed by the other side.
type silent struct {
	addr           string
	accepted, shut atomic.Int64
}

func silentUpstream(t *testing.T) *silent {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silent{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				b := make([]byte, 1024)
				for {
					if _, err := c.Read(b); err != nil {
						c.Close()
						s.shut.Add(1)
						return
					}
				}
			})
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// settle waits until the worker's descriptors and goroutines are back
// within margins of fds and gs, and returns what it last counted.
func settle(t *testing.T, fds, gs int) (int, int) {
	t.Helper()
	var f, g int
	for range 100 {
		f, g = openFDs(t), runtime.NumGoroutine()
		if f <= fds+8 && g <= gs+10 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return f, g
}

// The attack of issue 24: a command opens 120 CONNECT tunnels to an
// allowed upstream that accepts and stays silent, and ends. The worker
// holds no descriptor or goroutine of them afterwards, the upstream sees
// every tunnel it got closed, and the command got at most the proxy's
// bound of tunnels at once, the rest refused with a reason.
func TestTunnelsEndWithTheirCommand(t *testing.T) {
	needSandbox(t)
	up := silentUpstream(t)
	allow, err := netguard.ParseAllow([]string{up.addr})
	if err != nil {
		t.Fatal(err)
	}
	const bound = 32
	c := sandboxed(t, sandbox.Config{Network: true, Guard: netguard.New(allow, nil), ProxyConns: bound})
	// A first command warms up what every command shares (the
	// transport, the homes), so that the counts compare like with like.
	probe(t, c, `true`)
	fds0, gs0 := settle(t, openFDs(t), runtime.NumGoroutine())

	out := probe(t, c, fmt.Sprintf(`bash <<'EOS'
ok=0; refused=0
for i in $(seq 120); do
  exec {fd}<>/dev/tcp/127.0.0.1/3128 || break
  printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' >&$fd
  read -r -t 20 status <&$fd
  case $status in *" 200 "*) ok=$((ok+1));; *" 503 "*) refused=$((refused+1));; *) echo "other: $status";; esac
done
echo "ok=$ok refused=$refused"
EOS`, up.addr, up.addr))
	var ok, refused int
	if i := strings.Index(out, "ok="); i < 0 {
		t.Fatalf("no counts:\n%s", out)
	} else if _, err := fmt.Sscanf(out[i:], "ok=%d refused=%d", &ok, &refused); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	// A refusal may lose its answer to a reset (the command sees the
	// connection closed), never turn into a tunnel.
	if ok != bound || refused == 0 || strings.Contains(out, "other: HTTP") {
		t.Errorf("%d tunnels made and %d refused, want %d and the rest:\n%s", ok, refused, bound, out)
	}
	fds, gs := settle(t, fds0, gs0)
	if fds > fds0+8 || gs > gs0+10 {
		t.Errorf("after the command: %d descriptors (%d before), %d goroutines (%d before)", fds, fds0, gs, gs0)
	}
	waitUntil(t, func() bool { return up.shut.Load() == up.accepted.Load() }, "the upstream to see every tunnel closed")
	if n := up.accepted.Load(); n != bound {
		t.Errorf("the upstream got %d connections, want %d", n, bound)
	}
	t.Logf("tunnels %d, refused %d; descriptors %d → %d, goroutines %d → %d", ok, refused, fds0, fds, gs0, gs)
}

// A tunnel through which nothing passes is closed after the idle
// timeout while its command still runs: the command reads its end.
func TestIdleTunnelIsClosed(t *testing.T) {
	needSandbox(t)
	up := silentUpstream(t)
	allow, err := netguard.ParseAllow([]string{up.addr})
	if err != nil {
		t.Fatal(err)
	}
	c := sandboxed(t, sandbox.Config{Network: true, Guard: netguard.New(allow, nil), ProxyIdle: 300 * time.Millisecond})
	out := probe(t, c, fmt.Sprintf(`bash <<'EOS'
exec 3<>/dev/tcp/127.0.0.1/3128
printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' >&3
read -r status <&3; echo "$status"
if timeout 60 cat <&3 >/dev/null; then echo tunnel-closed; else echo tunnel-open; fi
EOS`, up.addr, up.addr))
	if !strings.Contains(out, "200 Connection Established") || !strings.Contains(out, "tunnel-closed") {
		t.Errorf("%s", out)
	}
	waitUntil(t, func() bool { return up.accepted.Load() == 1 && up.shut.Load() == 1 }, "the upstream to see the tunnel closed")
}

func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for range 300 {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
