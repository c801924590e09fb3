package computer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
)

// storeServerEnv, set, makes this test binary a nats-server of its own
// (a process the worker does not own and cannot restart) with its
// JetStream store in the directory it names; it writes its client URL to
// that directory's url file and serves until killed.
const storeServerEnv = "TOOLRUNTIME_TEST_STORE_SERVER"

func init() {
	dir := os.Getenv(storeServerEnv)
	if dir == "" {
		return
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "js"), NoSigs: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ns.ConfigureLogger()
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		fmt.Fprintln(os.Stderr, "the store server did not start")
		os.Exit(2)
	}
	if err := os.WriteFile(filepath.Join(dir, "url.tmp"), []byte(ns.ClientURL()), 0o600); err != nil {
		os.Exit(2)
	}
	_ = os.Rename(filepath.Join(dir, "url.tmp"), filepath.Join(dir, "url"))
	select {}
}

// externalStore starts a nats-server process whose JetStream store is
// under dir and returns its client URL.
func externalStore(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), storeServerEnv+"="+dir)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(dir, "url")); err == nil {
			return string(b)
		}
	}
	t.Fatal("the store server did not write its URL within 20 s")
	return ""
}

// stepper publishes steps to a worker and reads their outputs.
type stepper struct {
	t  *testing.T
	js jetstream.JetStream
}

func (s stepper) publish(agentID, turnID, name string, args any, wait time.Duration) error {
	a, _ := json.Marshal(args)
	body, _ := json.Marshal(map[string]any{"agent_id": agentID, "turn_id": turnID, "step": 0,
		"context": map[string]any{"kind": "text", "bindings": map[string]bool{"computer": true}},
		"output":  []any{map[string]any{"type": "function_call", "call_id": "c1", "name": name, "arguments": string(a)}}})
	m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, agentID, turnID))
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID(agentID, turnID, 0))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := s.js.PublishMsg(ctx, m)
	return err
}

func (s stepper) output(agentID, turnID string, wait time.Duration) event {
	s.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		oc, err := s.js.OrderedConsumer(context.Background(), protocol.StreamOutputs,
			jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, agentID, turnID)}})
		if err == nil {
			m, err := oc.Next(jetstream.FetchMaxWait(2 * time.Second))
			if err == nil {
				var ev event
				if err := json.Unmarshal(m.Data(), &ev); err != nil {
					s.t.Fatal(err)
				}
				return ev
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no call.output of %s/%s within %s: %v", agentID, turnID, wait, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// step publishes a step and returns its output; a refused publish fails
// the test (the store must stay writable).
func (s stepper) step(agentID, turnID, name string, args any) event {
	s.t.Helper()
	if err := s.publish(agentID, turnID, name, args, 10*time.Second); err != nil {
		s.t.Fatalf("publishing %s's %s step %s: %v (the store is not writable)", agentID, name, turnID, err)
	}
	return s.output(agentID, turnID, 60*time.Second)
}

// R3-32: one agent fills the small file system its home shares with the
// JetStream store, with no home quota to stop it (a 1 GiB quota on a
// 192 MiB disk), once with many files and once with one big file, and
// write_file. The reserve stops each at the disk, charged to it; the
// quiet agent beside it publishes, writes and runs commands throughout
// and after, and the store stays writable: an external nats-server
// process (which the worker cannot restart: a write error there is for
// good), and the embedded server. Without the reserve the first fill
// takes the disk and the store's next write fails.
func TestReserveKeepsSharedStoreWritable(t *testing.T) {
	needSandbox(t)
	for _, external := range []bool{true, false} {
		name := "embedded server"
		if external {
			name = "external nats-server process"
		}
		t.Run(name, func(t *testing.T) { reserveAttack(t, external) })
	}
}

func reserveAttack(t *testing.T, external bool) {
	disk := smallFS(t, "192m")
	// A writer at tmpfs speed passes the stop line (twice the reserve
	// free) by what it writes before the kill: some 19 MiB on an idle
	// 2-core machine. The reserve is what absorbs it.
	const reserve = 24 << 20
	var url string
	if external {
		url = externalStore(t, disk)
	} else {
		ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, NoMonitoring: true, StoreDir: filepath.Join(disk, "js"), Logger: workertest.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ns.Shutdown)
		url = ns.ClientURL()
	}
	// With a cgroup per command (the worker's default) a writer growing
	// its home below four times the reserve is paced to a tenth of a
	// core, and stops within a quarter of a reserve past the stop line
	// (twice the reserve free: paced, it stopped 0.5 MiB before the
	// line on a loaded host; unpaced, an idle host's writer passed it by
	// 19 MiB); without, the reserve itself absorbs what the writer
	// passes the line by.
	sb, why := pacingSandbox(t)
	floor := int64(reserve)
	if sb != nil {
		floor = 2*reserve - reserve/4
	} else {
		t.Logf("no pacing (%s): the bound is the reserve itself", why)
	}
	c := newCategory(t, computer.Config{Root: filepath.Join(disk, "homes"), DiskReserve: reserve, StorePath: filepath.Join(disk, "js"), Sandbox: sb, QuotaMode: computer.QuotaEstimate})
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := engine.Config{Name: "w1", Grace: 5 * time.Second, Topology: bus.Topology{AckWait: 2 * time.Second, MaxDeliver: 50}}
	w, err := engine.New(ctx, nc, cfg, turn.NewAssembler(c.Category()), nil, workertest.Logger())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	gw, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	js, err := jetstream.New(gw)
	if err != nil {
		t.Fatal(err)
	}
	s := stepper{t: t, js: js}

	// The quiet agent pings (write_file, then a command) all along.
	quiet := make(chan error, 1)
	stopQuiet := make(chan struct{})
	go func() {
		defer close(quiet)
		for i := 0; ; i++ {
			select {
			case <-stopQuiet:
				return
			default:
			}
			turnID := fmt.Sprintf("q%d", i)
			if err := s.publish("a2", turnID, computer.WriteFileName, map[string]any{"path": "note.txt", "content": strings.Repeat("quiet\n", 2000)}, 10*time.Second); err != nil {
				quiet <- fmt.Errorf("a2's publish %s: %v", turnID, err)
				return
			}
			if ev := s.output("a2", turnID, 60*time.Second); ev.Status != protocol.StatusOK {
				quiet <- fmt.Errorf("a2's write_file %s beside the filler: %+v", turnID, ev)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	fills := []struct{ turn, command string }{
		{"files", `i=0; while :; do head -c 1048576 /dev/zero > f$i || exit 1; i=$((i+1)); done`},
		{"big", `head -c 200000000 /dev/zero > big`},
	}
	for _, f := range fills {
		ev := s.step("a1", f.turn, computer.RunCommandName, map[string]any{"command": f.command, "timeout_seconds": 60})
		if ev.Error == nil && !strings.Contains(ev.Item.Output, "File size limit exceeded") || !strings.Contains(ev.Item.Output, "nearly full") && !strings.Contains(ev.Item.Output, "room left") && !strings.Contains(ev.Item.Output, "File size limit exceeded") {
			t.Errorf("a1's fill %q was not stopped at the reserve: %+v", f.turn, ev)
		}
		free := freeBytes(t, disk)
		t.Logf("after a1's fill %q: %d KiB free (reserve %d KiB)", f.turn, free>>10, reserve>>10)
		if free < floor {
			t.Errorf("after a1's fill %q only %d KiB are free, want at least %d KiB (reserve %d KiB)", f.turn, free>>10, floor>>10, reserve>>10)
		}
	}
	// write_file cannot take the reserve either: refused, charged to a1.
	refused := false
	for i := range 40 {
		ev := s.step("a1", fmt.Sprintf("wf%d", i), computer.WriteFileName, map[string]any{"path": fmt.Sprintf("w%d", i), "content": strings.Repeat("x", 900<<10)})
		if ev.Error != nil {
			if !strings.Contains(ev.Item.Output, "nearly full") {
				t.Errorf("a1's write_file %d failed, not for the reserve: %+v", i, ev)
			}
			refused = true
			break
		}
	}
	if !refused {
		t.Error("a1's 40 write_file steps of 900 KiB each (36 MiB) were all accepted on a disk near its reserve")
	}
	// The store took a1's steps (900 KiB each) from the reserve: that is
	// what it is for.
	if free := freeBytes(t, disk); free < reserve/2 {
		t.Errorf("after a1's write_file steps only %d KiB are free: the reserve of %d KiB was taken", free>>10, reserve>>10)
	}
	close(stopQuiet)
	if err := <-quiet; err != nil {
		t.Error(err)
	}
	// The quiet agent's steps work: a command (which writes its small
	// output log) and a read.
	if ev := s.step("a2", "cmd", computer.RunCommandName, map[string]any{"command": "echo hello > hi.txt; cat hi.txt"}); ev.Status != protocol.StatusOK || !strings.Contains(ev.Item.Output, "hello") {
		t.Errorf("a2's command beside a1 at the reserve: %+v", ev)
	}
	if ev := s.step("a2", "read", computer.ReadFileName, map[string]any{"path": "note.txt"}); ev.Status != protocol.StatusOK || !strings.Contains(ev.Item.Output, "quiet") {
		t.Errorf("a2's read_file: %+v", ev)
	}
	// a1 frees its space and works again.
	if ev := s.step("a1", "rm", computer.RunCommandName, map[string]any{"command": "rm -f f* big"}); ev.Status != protocol.StatusOK {
		t.Errorf("a1's rm: %+v", ev)
	}
	if ev := s.step("a1", "after", computer.WriteFileName, map[string]any{"path": "small", "content": "hello"}); ev.Status != protocol.StatusOK {
		t.Errorf("a1's write_file after its rm: %+v", ev)
	}
}

// freeBytes is what the file system of dir has free for an ordinary user.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}
