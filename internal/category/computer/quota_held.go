package computer

import (
	"bytes"
	"os"
	"strconv"
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

// heldBy is what the files on the device dev that no name holds (deleted
// while open, or made with O_TMPFILE) take while the processes of tree
// hold them, through a descriptor or a mapping: no walk sees them, and a
// command could otherwise fill the disk with them. Each counts once, as
// its blocks or its size, whichever is more (a file mapped and written
// through the mapping raises no event, and its size is what the mapping
// may fill; RLIMIT_FSIZE bounds it).
//
// The mappings are read only with maps: reading them takes each
// process's mmap lock, which a SCHED_IDLE writer that maps and unmaps
// its buffers holds while preempted, and a worker that waits for it
// (tens of milliseconds on a loaded host) lets the writer run on. The
// follower reads them while the tree is stopped.
//
// sizes is each file's part of total, for the file size cap near the
// bound (fillLevel).
func (p *procTree) heldBy(dev uint64, maps bool) (total int64, sizes []int64) {
	if p == nil {
		return 0, nil
	}
	seen := map[uint64]bool{}
	count := func(ino uint64, n int64) {
		if !seen[ino] {
			seen[ino] = true
			total += n
			sizes = append(sizes, n)
		}
	}
	var st unix.Stat_t
	for pid := range p.members() {
		dir := "/proc/" + strconv.Itoa(pid)
		fds, _ := os.ReadDir(dir + "/fd")
		for _, fd := range fds {
			// Stat follows the magic link to the open file itself.
			if unix.Stat(dir+"/fd/"+fd.Name(), &st) != nil || st.Dev != dev || st.Nlink != 0 || st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue
			}
			count(st.Ino, max(st.Blocks*512, st.Size))
		}
		if !maps {
			continue
		}
		b, err := os.ReadFile(dir + "/maps")
		if err != nil {
			continue
		}
		for _, m := range heldMaps(b, dev) {
			count(m.ino, m.size)
		}
	}
	return total, sizes
}

// heldMap is a deleted file mapped: its inode and how far into it the
// mappings reach.
type heldMap struct {
	ino  uint64
	size int64
}

// heldMaps reads /proc/<pid>/maps (b) for mappings of deleted files on
// dev: "start-end perms offset major:minor inode path (deleted)". Each
// inode is given once, with the farthest byte any of its mappings
// reaches.
func heldMaps(b []byte, dev uint64) []heldMap {
	var out []heldMap
	at := map[uint64]int{}
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if !bytes.HasSuffix(line, []byte(" (deleted)")) {
			continue
		}
		f := bytes.Fields(line)
		if len(f) < 6 {
			continue
		}
		span := bytes.SplitN(f[0], []byte{'-'}, 2)
		mm := bytes.SplitN(f[3], []byte{':'}, 2)
		if len(span) != 2 || len(mm) != 2 {
			continue
		}
		start, err1 := strconv.ParseUint(string(span[0]), 16, 64)
		end, err2 := strconv.ParseUint(string(span[1]), 16, 64)
		off, err3 := strconv.ParseUint(string(f[2]), 16, 64)
		major, err4 := strconv.ParseUint(string(mm[0]), 16, 32)
		minor, err5 := strconv.ParseUint(string(mm[1]), 16, 32)
		ino, err6 := strconv.ParseUint(string(f[4]), 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || err6 != nil || end < start || ino == 0 {
			continue
		}
		if unix.Mkdev(uint32(major), uint32(minor)) != dev {
			continue
		}
		reach := int64(min(off+(end-start), 1<<62))
		if i, ok := at[ino]; ok {
			out[i].size = max(out[i].size, reach)
			continue
		}
		at[ino] = len(out)
		out = append(out, heldMap{ino: ino, size: reach})
	}
	return out
}
