package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"syscall"
)

// sign is an error message by which a program tells that a limit stopped
// it. Programs word them differently; these are libc's strerror texts and
// the shells' and common runtimes' own.
type sign struct {
	limit string
	texts []string
}

var signs = []sign{
	{"processes", []string{"cannot fork", "can't fork", "fork: retry", "resource temporarily unavailable", "fork failed"}},
	{"memory", []string{"cannot allocate memory", "out of memory", "memoryerror", "bad_alloc", "memory exhausted", "failed to reserve", "allocation failed"}},
	{"open files", []string{"too many open files"}},
	{"file size", []string{"file too large", "file size limit exceeded"}},
	{"cpu", []string{"cpu time limit exceeded"}},
}

// maxSign is the longest text of signs: the overlap Watch keeps between
// writes so that a text cut in two is still found.
const maxSign = 40

// Watch passes a command's output on to W and remembers the signs of a
// limit it saw in it. Like the output it wraps, it is written by one
// goroutine at a time.
type Watch struct {
	W    io.Writer
	seen map[string]string // limit → the text seen
	tail []byte
}

func (w *Watch) Write(b []byte) (int, error) {
	if len(w.seen) < len(signs) {
		buf := append(w.tail[:len(w.tail):len(w.tail)], b...)
		low := bytes.ToLower(buf)
		for _, s := range signs {
			if _, ok := w.seen[s.limit]; ok {
				continue
			}
			for _, t := range s.texts {
				if bytes.Contains(low, []byte(t)) {
					if w.seen == nil {
						w.seen = map[string]string{}
					}
					w.seen[s.limit] = t
					break
				}
			}
		}
		if len(buf) > maxSign {
			buf = buf[len(buf)-maxSign:]
		}
		w.tail = append(w.tail[:0], buf...)
	}
	return w.W.Write(b)
}

// Notes says which limits stopped a command, as lines for the model: for
// sure when its shell was killed by the limit's signal, "probably" when
// only the output shows a limit's error message (a program may print
// such a text for other reasons).
func (s *Sandbox) Notes(sig syscall.Signal, w *Watch, e End) []string {
	l := s.cfg.Limits
	fileLimit := size(l.FileBytes)
	if e.FileBytes > 0 {
		fileLimit = size(e.FileBytes) + ", " + e.FileWhy
	}
	var notes []string
	if e.OOMKills > 0 {
		notes = append(notes, fmt.Sprintf("[killed by the sandbox's memory limit: the command's processes, its /tmp and /dev/shm and its shared memory together may hold %s; the kernel killed %d of its processes]", size(l.Memory), e.OOMKills))
	}
	switch sig {
	case syscall.SIGXCPU:
		notes = append(notes, fmt.Sprintf("[stopped by the sandbox's CPU time limit: %d s of CPU per process (SIGXCPU)]", l.CPUSeconds))
	case syscall.SIGXFSZ:
		notes = append(notes, fmt.Sprintf("[stopped by the sandbox's file size limit: no file may grow beyond %s (SIGXFSZ)]", fileLimit))
	}
	if w == nil {
		return notes
	}
	say := func(limit, what string) {
		if t, ok := w.seen[limit]; ok {
			notes = append(notes, fmt.Sprintf("[the output says %q: probably the sandbox's %s]", t, what))
		}
	}
	say("processes", fmt.Sprintf("process limit (at most %d processes and threads per command; fork fails with EAGAIN beyond it)", l.Processes))
	say("memory", fmt.Sprintf("memory limit (%s of address space per process; allocations fail with ENOMEM beyond it)", size(l.MemoryBytes)))
	say("open files", fmt.Sprintf("open files limit (%d per process)", l.OpenFiles))
	if sig != syscall.SIGXFSZ {
		say("file size", fmt.Sprintf("file size limit (%s per file), or /tmp is full (%s)", fileLimit, size(l.TmpBytes)))
	}
	if sig != syscall.SIGXCPU {
		say("cpu", fmt.Sprintf("CPU time limit (%d s per process)", l.CPUSeconds))
	}
	if sig == syscall.SIGKILL && e.OOMKills == 0 {
		if _, ok := w.seen["memory"]; !ok {
			notes = append(notes, fmt.Sprintf("[SIGKILL: a kill, the CPU time limit's hard stop (%d s per process) or the machine's out-of-memory killer]", l.CPUSeconds+1))
		}
	}
	return notes
}

func size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
