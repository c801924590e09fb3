package computer

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// heldDeleted is what files beneath dir that were deleted but are still
// held open take on disk: no walk sees them, and a command can fill a
// disk with them. It reads every process's descriptors (/proc/<pid>/fd,
// as root or as the user commands run as): a sandbox binds the home at
// its own path, so the kernel names such a file "<dir>/<name>
// (deleted)". Each file counts once.
func heldDeleted(dir string) int64 {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	prefix := dir + "/"
	seen := map[uint64]bool{}
	var total int64
	for _, p := range procs {
		if n := p.Name(); n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		fdDir := "/proc/" + p.Name() + "/fd/"
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link := fdDir + fd.Name()
			target, err := os.Readlink(link)
			if err != nil || !strings.HasPrefix(target, prefix) || !strings.HasSuffix(target, " (deleted)") {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(link, &st) != nil || st.Nlink != 0 || seen[st.Ino] {
				continue
			}
			seen[st.Ino] = true
			total += st.Blocks * 512
		}
	}
	return total
}
