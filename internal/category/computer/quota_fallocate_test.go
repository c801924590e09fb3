package computer_test

import (
	"os"
	"strings"
	"testing"
)

// Bursts of preallocation, run as uid 65534 by TestQuotaAsNobody (each on
// its own 256 MiB tmpfs, homes of 32 MiB and 5,000 entries, a neighbour
// writing every 20 ms). One fallocate call took any number of blocks at
// once, faster than any count follows: 60 files of 4 MiB by truncate
// plus posix_fallocate went +4 to +110 MiB past. The sandbox's seccomp
// filter refuses every allocating mode (EOPNOTSUPP) and io_uring
// (ENOSYS), so:
//   - posix_fallocate falls back to a byte written per block, writes the
//     quota follows: stopped within half the bytes (below);
//   - fallocate(1), with or without --keep-size, and io_uring's
//     fallocate fail at their first call: the disk does not grow and the
//     command is not stopped (a zero range fails on tmpfs with or
//     without the filter; TestNoAllocatingFallocate in the sandbox
//     package shows the filter refusing it on ext4).
//
// Without the filter, each (but the zero range) ends stopped past its
// bounds (not stopped, for those the filter refuses): +8 to +24 MiB
// for the 60 files, +28 MiB for the bursts, +4 MiB for fallocate(1) with
// or without --keep-size, +4 to +116 MiB through io_uring. (A file is bounded by
// the room left when the command started, RLIMIT_FSIZE, so a burst is
// 30 MiB at most.)
func TestQuotaNobodyFallocate(t *testing.T) {
	if os.Getenv(nobodyDisksEnv) == "" {
		t.Skip("run by TestQuotaAsNobody, as uid 65534")
	}
	const (
		// Half the bytes for the fallback: a byte written per 4 KiB
		// block, the most disk a write call takes for its cost (+1.6 to
		// +8.2 MiB at load 15 to 23; without the filter +28 MiB).
		pastBytes = nobodyBytes / 2
		pastFiles = nobodyFiles / 5
	)
	for _, a := range []struct {
		name, command string
		bytes, files  int64
	}{
		{"60 files of 4 MiB by truncate and posix_fallocate", `python3 -c '
import os
for i in range(60):
    fd = os.open("s%d" % i, os.O_CREAT | os.O_RDWR, 0o600)
    os.truncate(fd, 4 << 20)
    os.posix_fallocate(fd, 0, 4 << 20)
    os.close(fd)
'`, pastBytes, pastFiles},
		{"posix_fallocate bursts of 30 MiB", `python3 -c '
import os
for i in range(4):
    fd = os.open("b%d" % i, os.O_CREAT | os.O_RDWR, 0o600)
    os.posix_fallocate(fd, 0, 30 << 20)
    os.close(fd)
'`, pastBytes, pastFiles},
		{"fallocate(1)", `n=0; i=0; while [ $i -lt 60 ]; do fallocate -l 4MiB f$i 2>/dev/null || n=$((n+1)); i=$((i+1)); done; echo refused $n`, nobodyNever, nobodyNever},
		{"fallocate(1) --keep-size", `n=0; i=0; while [ $i -lt 60 ]; do : > k$i; fallocate --keep-size -l 4MiB k$i 2>/dev/null || n=$((n+1)); i=$((i+1)); done; echo refused $n`, nobodyNever, nobodyNever},
		{"fallocate(1) --zero-range", `n=0; i=0; while [ $i -lt 60 ]; do truncate -s 4MiB z$i; fallocate --zero-range -l 4MiB z$i 2>/dev/null || n=$((n+1)); i=$((i+1)); done; echo refused $n`, nobodyNever, nobodyNever},
		{"io_uring fallocate", ioUringFallocate, nobodyNever, nobodyNever},
	} {
		t.Run(strings.ReplaceAll(a.name, " ", "_"), func(t *testing.T) {
			nobodyAttack(t, a.name, a.command, a.bytes, a.files)
		})
	}
}

// ioUringFallocate preallocates 60 files of 4 MiB through an io_uring
// ring (IORING_OP_FALLOCATE, which no seccomp filter sees), one
// submission at a time.
const ioUringFallocate = `python3 -c '
import ctypes, mmap, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
p = ctypes.create_string_buffer(120)
ring = libc.syscall(425, 8, p)
if ring < 0:
    print("io_uring_setup:", os.strerror(ctypes.get_errno()))
    sys.exit(1)
sqn, cqn = struct.unpack_from("II", p, 0)
feat = struct.unpack_from("I", p, 20)[0]
sh, st, sm, _, _, _, sa, _ = struct.unpack_from("8I", p, 40)
ch, ct, cm, _, _, cq, _, _ = struct.unpack_from("8I", p, 80)
ssize, csize = sa + sqn * 4, cq + cqn * 16
if feat & 1:
    ssize = csize = max(ssize, csize)
rw = mmap.PROT_READ | mmap.PROT_WRITE
sr = mmap.mmap(ring, ssize, mmap.MAP_SHARED, rw, offset=0)
cr = sr if feat & 1 else mmap.mmap(ring, csize, mmap.MAP_SHARED, rw, offset=0x8000000)
sqes = mmap.mmap(ring, sqn * 64, mmap.MAP_SHARED, rw, offset=0x10000000)
mask = struct.unpack_from("I", sr, sm)[0]
cmask = struct.unpack_from("I", cr, cm)[0]
done = 0
for i in range(60):
    fd = os.open("u%d" % i, os.O_CREAT | os.O_RDWR, 0o600)
    tail = struct.unpack_from("I", sr, st)[0]
    idx = tail & mask
    # opcode 17 (fallocate): off is the offset, addr the length, len the mode.
    struct.pack_into("BBHiQQII", sqes, idx * 64, 17, 0, 0, fd, 0, 4 << 20, 0, 0)
    struct.pack_into("Q", sqes, idx * 64 + 32, i)
    struct.pack_into("I", sr, sa + idx * 4, idx)
    struct.pack_into("I", sr, st, tail + 1)
    if libc.syscall(426, ring, 1, 1, 1, None, 0) < 0:
        print("io_uring_enter:", os.strerror(ctypes.get_errno()))
        sys.exit(1)
    head = struct.unpack_from("I", cr, ch)[0]
    res = struct.unpack_from("i", cr, cq + (head & cmask) * 16 + 8)[0]
    struct.pack_into("I", cr, ch, head + 1)
    done += res == 0
    os.close(fd)
print("allocated", done)
'`
