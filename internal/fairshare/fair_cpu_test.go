package fairshare

import (
	"syscall"
	"time"
)

// cpuTime is the CPU this process has used, user and system: the
// benchmarks' figure per step on a loaded machine, where wall time
// measures the other processes.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
