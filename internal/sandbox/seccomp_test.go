package sandbox_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"golang.org/x/net/bpf"

	"github.com/agentbull/toolruntime/internal/sandbox"
)

// A command may not set extended attributes (ENOTSUP, as on a file
// system without them), through any of the calls, 32-bit ones
// included where the host runs them; it reads, lists and works as
// before, and the filter's descriptor does not reach it.
func TestNoExtendedAttributes(t *testing.T) {
	s := newSandbox(t, sandbox.Config{})
	h := homeDir(t, s)
	res := run(t, context.Background(), s, h, `: > f
python3 -c '
import errno, os
for name, call in (("setxattr", lambda: os.setxattr("f", "user.a", b"v")),
                   ("lsetxattr", lambda: os.setxattr("f", "user.a", b"v", follow_symlinks=False)),
                   ("fsetxattr", lambda: os.setxattr(os.open("f", os.O_RDONLY), "user.a", b"v"))):
    try:
        call()
        print(name, "set")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
print("listed", os.listxattr("f"))
print("fd 8", "open" if "8" in os.listdir("/proc/self/fd") else "closed")
'`)
	want := "setxattr ENOTSUP\nlsetxattr ENOTSUP\nfsetxattr ENOTSUP\nlisted []\nfd 8 closed\n"
	if res.code != 0 || res.out != want {
		t.Errorf("got %q (exit %d), want %q", res.out, res.code, want)
	}
	if strings.Contains(res.out, " set") {
		t.Error("an extended attribute was set")
	}
}

// fallocate allocates for no mode but punch hole plus keep size (3),
// which frees: every other mode fails with EOPNOTSUPP before the kernel
// looks at the descriptor (a bad one gets EOPNOTSUPP, not EBADF), on any
// file system. posix_fallocate falls back to writing a byte in each
// block (which the home's quota follows), and io_uring, whose operations
// no filter sees, is not there (ENOSYS).
func TestNoAllocatingFallocate(t *testing.T) {
	s := newSandbox(t, sandbox.Config{})
	h := homeDir(t, s)
	res := run(t, context.Background(), s, h, `python3 -c '
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
def fa(fd, mode, n):
    if libc.fallocate(fd, mode, 0, n) == 0:
        return "ok"
    return errno.errorcode[ctypes.get_errno()]
# default, keep size, punch+keep, collapse, zero range (+keep), insert, unshare, write zeroes
print("bad fd", " ".join("%#x=%s" % (m, fa(-1, m, 1 << 20)) for m in (0, 1, 3, 8, 0x10, 0x11, 0x20, 0x40, 0x80)))
fd = os.open("f", os.O_CREAT | os.O_RDWR, 0o600)
print("mode 0", fa(fd, 0, 1 << 20), os.fstat(fd).st_size, os.fstat(fd).st_blocks)
print("keep size", fa(fd, 1, 1 << 20), os.fstat(fd).st_blocks)
print("zero range", fa(fd, 0x10, 1 << 20), os.fstat(fd).st_blocks)
os.posix_fallocate(fd, 0, 1 << 20)
st = os.fstat(fd)
print("posix_fallocate", st.st_size, st.st_blocks * 512 >= 1 << 20)
print("punch", fa(fd, 3, 1 << 20), os.fstat(fd).st_size, os.fstat(fd).st_blocks)
p = ctypes.create_string_buffer(120)
r = libc.syscall(425, 8, p)
print("io_uring_setup", r, errno.errorcode.get(ctypes.get_errno()) if r < 0 else "")
'`)
	// ENOTSUP is EOPNOTSUPP (95); Python names it so.
	want := "bad fd 0x0=ENOTSUP 0x1=ENOTSUP 0x3=EBADF 0x8=ENOTSUP 0x10=ENOTSUP 0x11=ENOTSUP 0x20=ENOTSUP 0x40=ENOTSUP 0x80=ENOTSUP\n" +
		"mode 0 ENOTSUP 0 0\nkeep size ENOTSUP 0\nzero range ENOTSUP 0\n" +
		"posix_fallocate 1048576 True\npunch ok 1048576 0\nio_uring_setup -1 ENOSYS\n"
	if res.code != 0 || res.out != want {
		t.Errorf("got %q (exit %d), want %q", res.out, res.code, want)
	}
}

// The program's verdicts on every architecture it knows, run in a BPF
// machine (32-bit ones cannot all run here): the refused calls, x32's
// numbers like x86-64's, fallocate's modes, and everything else let
// through, on an architecture it does not know too.
func TestSeccompProgramVerdicts(t *testing.T) {
	prog := sandbox.SeccompProgram()
	raw := make([]bpf.RawInstruction, 0, len(prog)/8)
	for b := prog; len(b) >= 8; b = b[8:] {
		raw = append(raw, bpf.RawInstruction{Op: binary.LittleEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.LittleEndian.Uint32(b[4:])})
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("an instruction did not decode")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	const (
		allow  = 0x7fff0000
		notSup = 0x00050000 | 95
		noSys  = 0x00050000 | 38
	)
	// verdict runs the program on a seccomp_data. The machine loads words
	// big-endian, so each word is stored so: it reads the values the
	// kernel's native loads read on a little-endian host.
	verdict := func(arch, nr uint32, mode uint64) int {
		d := make([]byte, 64)
		binary.BigEndian.PutUint32(d[0:], nr)
		binary.BigEndian.PutUint32(d[4:], arch)
		binary.BigEndian.PutUint32(d[24:], uint32(mode))
		binary.BigEndian.PutUint32(d[28:], uint32(mode>>32))
		v, err := vm.Run(d)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	type arch struct {
		name                string
		id                  uint32
		xattr, uring        []uint32
		fallocate, harmless uint32
	}
	for _, a := range []arch{
		{"x86-64", 0xc000003e, []uint32{188, 189, 190, 463}, []uint32{425, 426, 427}, 285, 1},
		{"x32", 0xc000003e, []uint32{188 | 0x40000000, 189 | 0x40000000, 190 | 0x40000000, 463 | 0x40000000}, []uint32{425 | 0x40000000, 426 | 0x40000000, 427 | 0x40000000}, 285 | 0x40000000, 1 | 0x40000000},
		{"i386", 0x40000003, []uint32{226, 227, 228, 463}, []uint32{425, 426, 427}, 324, 4},
		{"arm64", 0xc00000b7, []uint32{5, 6, 7, 463}, []uint32{425, 426, 427}, 47, 64},
		{"arm", 0x40000028, []uint32{226, 227, 228, 463}, []uint32{425, 426, 427}, 352, 4},
	} {
		for _, nr := range a.xattr {
			if v := verdict(a.id, nr, 0); v != notSup {
				t.Errorf("%s: call %d: %#x, want ENOTSUP", a.name, nr, v)
			}
		}
		for _, nr := range a.uring {
			if v := verdict(a.id, nr, 0); v != noSys {
				t.Errorf("%s: call %d: %#x, want ENOSYS", a.name, nr, v)
			}
		}
		for _, m := range []uint64{0, 1, 2, 8, 0x10, 0x11, 0x20, 0x40, 0x80, 7, 0xffffffff, 1 << 32} {
			if v := verdict(a.id, a.fallocate, m); v != notSup {
				t.Errorf("%s: fallocate mode %#x: %#x, want EOPNOTSUPP", a.name, m, v)
			}
		}
		// The kernel reads the mode as an int: the upper half is not its.
		for _, m := range []uint64{3, 3 | 1<<32} {
			if v := verdict(a.id, a.fallocate, m); v != allow {
				t.Errorf("%s: fallocate mode %#x: %#x, want allowed", a.name, m, v)
			}
		}
		if v := verdict(a.id, a.harmless, 0); v != allow {
			t.Errorf("%s: call %d: %#x, want allowed", a.name, a.harmless, v)
		}
	}
	// riscv64: its numbers are not the ones above.
	if v := verdict(0xc00000f3, 188, 0); v != allow {
		t.Errorf("an unknown architecture: %#x, want allowed", v)
	}
}
