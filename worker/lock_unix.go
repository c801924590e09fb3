//go:build unix

package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile is the file in the data directory an embedded worker holds
// locked while its server runs.
const lockFile = "toolruntime-worker.lock"

// lockDataDir takes an exclusive lock on dir for this process, so that
// two embedded servers never write one JetStream store. The lock ends
// with the process, however it ends.
func lockDataDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another worker"
			if pid := strings.TrimSpace(string(holder)); pid != "" {
				who += " (pid " + pid + ")"
			}
			return nil, fmt.Errorf("the data directory %s is in use by %s: give this worker its own --data-dir, or join the running worker's server with --nats-url", dir, who)
		}
		return nil, fmt.Errorf("locking the data directory %s: %w", dir, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}
