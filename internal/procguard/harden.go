package procguard

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Harden forgets the named environment variables, then makes the process
// non-dumpable. Call it once the variables have been read. The variables
// are removed from the environment whatever happens; an error means their
// values may still be in the initial environment block, or that the
// process stays dumpable, and says which.
func Harden(forget ...string) error {
	var errs []error
	if err := blankEnv(forget); err != nil {
		errs = append(errs, fmt.Errorf("procguard: overwriting the initial environment: %w", err))
	}
	for _, name := range forget {
		_ = os.Unsetenv(name)
	}
	// After blankEnv: a non-dumpable process's /proc/self/mem belongs to
	// root, so an unprivileged worker could no longer open it.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("procguard: PR_SET_DUMPABLE: %w", err))
	}
	return errors.Join(errs...)
}

// blankEnv overwrites with NULs the values of the named variables in the
// environment block the kernel gave the process. Go's runtime copied the
// block into its own strings at start, so nothing reads it any more; the
// kernel still shows it as /proc/<pid>/environ.
func blankEnv(names []string) error {
	// Only what is set: a process with none of them (a developer's
	// "go run") has nothing to overwrite and no reason to open its memory.
	names = slices.DeleteFunc(slices.Clone(names), func(n string) bool {
		_, ok := os.LookupEnv(n)
		return !ok
	})
	if len(names) == 0 {
		return nil
	}
	start, end, err := envBounds()
	if err != nil {
		return err
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, int64(start)); err != nil {
		return err
	}
	changed := false
	for off := 0; off < len(block); {
		n := bytes.IndexByte(block[off:], 0)
		if n < 0 {
			n = len(block) - off
		}
		entry := block[off : off+n]
		for _, name := range names {
			if bytes.HasPrefix(entry, []byte(name+"=")) {
				clear(entry[len(name)+1:])
				changed = true
			}
		}
		off += n + 1
	}
	if !changed {
		return nil
	}
	_, err = mem.WriteAt(block, int64(start))
	return err
}

// envBounds reads env_start and env_end, fields 50 and 51 of
// /proc/self/stat (proc(5)).
func envBounds() (uint64, uint64, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after its closing parenthesis start with field 3.
	i := bytes.LastIndexByte(b, ')')
	fields := strings.Fields(string(b[i+1:]))
	const envStart = 50 - 3
	if i < 0 || len(fields) <= envStart+1 {
		return 0, 0, errors.New("/proc/self/stat has no env_start and env_end")
	}
	start, err1 := strconv.ParseUint(fields[envStart], 10, 64)
	end, err2 := strconv.ParseUint(fields[envStart+1], 10, 64)
	if err := errors.Join(err1, err2); err != nil || end < start || start == 0 {
		return 0, 0, fmt.Errorf("/proc/self/stat: env_start %q, env_end %q", fields[envStart], fields[envStart+1])
	}
	return start, end, nil
}
