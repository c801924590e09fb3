package sandbox_test

import (
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbull/toolruntime/internal/sandbox"
)

// watched writes out in pieces of n bytes through a Watch and returns
// the notes it gives for no signal.
func watched(t *testing.T, s *sandbox.Sandbox, out []byte, n int) []string {
	w := &sandbox.Watch{W: io.Discard}
	for len(out) > 0 {
		k := min(n, len(out))
		if _, err := w.Write(out[:k]); err != nil {
			t.Fatal(err)
		}
		out = out[k:]
	}
	return s.Notes(0, w, sandbox.End{})
}

// The signs of a limit are found however the output was cut into
// writes, in any case, and are not invented.
func FuzzWatch(f *testing.F) {
	need(f)
	s, err := sandbox.New(sandbox.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	f.Add([]byte("sh: 1: Cannot fork\n"), 1)
	f.Add([]byte("dd: memory exhausted by input buffer\nToo many open files"), 7)
	f.Add([]byte("plain output"), 3)
	f.Fuzz(func(t *testing.T, out []byte, n int) {
		if n < 1 || n > 1<<16 {
			return
		}
		whole := watched(t, s, out, len(out)+1)
		if got := watched(t, s, out, n); strings.Join(got, "|") != strings.Join(whole, "|") {
			t.Errorf("in writes of %d: %q; at once: %q", n, got, whole)
		}
		// A note quotes a text that is in the output.
		low := strings.ToLower(string(out))
		for _, note := range whole {
			if q := strings.Split(note, `"`); len(q) >= 3 && !strings.Contains(low, q[1]) {
				t.Errorf("note %q quotes what the output lacks", note)
			}
		}
	})
}

func TestNotes(t *testing.T) {
	s := newSandbox(t, sandbox.Config{Limits: sandbox.Limits{Processes: 32}})
	tests := []struct {
		out  string
		sig  syscall.Signal
		want string
	}{
		{"sh: 1: Cannot fork\n", 0, "process limit (at most 32"},
		{"bash: fork: retry: Resource temporarily unavailable", 0, "process limit"},
		{"MemoryError\n", 0, "memory limit (256 MiB"},
		{"", syscall.SIGXCPU, "CPU time limit: 600 s"},
		{"", syscall.SIGXFSZ, "file size limit: no file may grow beyond 1 GiB"},
		{"OSError: [Errno 24] Too many open files", 0, "open files limit (1024"},
		{"all fine\n", 0, ""},
	}
	for _, tt := range tests {
		w := &sandbox.Watch{W: io.Discard}
		w.Write([]byte(tt.out))
		got := strings.Join(s.Notes(tt.sig, w, sandbox.End{}), "\n")
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%q %v: %q, want %q", tt.out, tt.sig, got, tt.want)
		}
	}
}
