package sandbox

import (
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"
)

// A spare's idle timer that fired just as DropSpares collected the spare
// (its Stop too late) runs once DropSpares has let go of the lock: it must
// not find the spare to end it a second time, which counted it off the
// budget twice (the total went to -1, and the budget could be exceeded by
// one for every such race) and ended its run twice.
func TestIdleTimerAfterDropSpares(t *testing.T) {
	s := &Sandbox{cfg: Config{Spares: 4, SpareIdle: time.Minute, Logger: slog.New(slog.DiscardHandler)}}
	m := &s.spares
	const key = "home"
	pl := &pool{want: 1, changed: make(chan struct{})}
	m.pools = map[string]*pool{key: pl}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	left, leftW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	leftW.Close()
	blockR, block, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	blockR.Close()
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer cmdR.Close()
	p := &spare{run: &Run{Cmd: cmd, left: left, block: block}, cancel: func() { _ = cmd.Process.Kill() },
		cmdW: cmdW, out: &outSwitch{}, ready: true, timer: time.AfterFunc(time.Hour, func() {})}
	pl.ready = []*spare{p}
	m.total = 1

	s.DropSpares()
	s.idle(key, pl, p) // the timer's callback, after DropSpares
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.total != 0 {
		t.Errorf("spares counted after DropSpares and a late idle timer: %d, want 0", m.total)
	}
}
