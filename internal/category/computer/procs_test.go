package computer_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var markers atomic.Int64

// marker is a sleep duration no other process on the machine has in its
// command line: "sleep <marker>" is a process the test can find on the
// host, whatever pid namespace it runs in.
func marker() string {
	return fmt.Sprintf("1000.%d%06d", time.Now().UnixNano()%1e9, markers.Add(1))
}

// hostProcs are the live processes of the host (not zombies) whose
// command line holds token as an argument.
func hostProcs(token string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte("\x00"+token)) {
			continue
		}
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if f := strings.Fields(string(stat[i+1:])); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
			continue
		}
		found = append(found, filepath.Base(d)+" "+strings.ReplaceAll(string(b), "\x00", " "))
	}
	return found
}

// assertNoProcess waits until no process holds token.
func assertNoProcess(t *testing.T, what, token string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := hostProcs(token)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s survived the call: %q", what, left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
