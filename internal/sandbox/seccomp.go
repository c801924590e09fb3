package sandbox

import (
	"encoding/binary"
	"os"
)

// The classic BPF that bwrap loads with --seccomp. A home's quota is a
// count the worker keeps where the kernel bounds nothing (the estimate),
// so the filter refuses the calls that grow a disk faster than any count
// can follow, each as a kernel or file system without them would; every
// other call is allowed:
//
//   - setxattr, lsetxattr, fsetxattr and setxattrat fail with ENOTSUP:
//     a 0-byte file can hold megabytes of attributes, which tmpfs
//     charges to its inodes, and a writer of them outruns the worker's
//     first look. Reading, listing and removing attributes stay allowed.
//   - fallocate fails with EOPNOTSUPP for every mode but punch hole plus
//     keep size (3), which only frees: one call takes any number of
//     blocks at once. glibc's posix_fallocate then falls back to writing
//     a byte in each block, writes the worker follows.
//   - io_uring_setup, io_uring_enter and io_uring_register fail with
//     ENOSYS: a ring's operations (fallocate, setxattr among them) are
//     not system calls, so no filter sees them.
const (
	bpfLdAbsW = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfAndK   = 0x54 // BPF_ALU | BPF_AND | BPF_K
	bpfJeqK   = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfRetK   = 0x06 // BPF_RET | BPF_K

	seccompAllow = 0x7fff0000
	seccompErrno = 0x00050000
	errnoNotSup  = 95 // EOPNOTSUPP, ENOTSUP
	errnoNoSys   = 38 // ENOSYS

	auditArchX8664   = 0xc000003e
	auditArchI386    = 0x40000003
	auditArchAArch64 = 0xc00000b7
	auditArchARM     = 0x40000028
	x32Bit           = 0x40000000

	// fallocPunchKeep is FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE.
	fallocPunchKeep = 3

	// Offsets in struct seccomp_data: nr, arch, and the low half of
	// args[1] (fallocate's mode) on a little-endian host.
	dataNr    = 0
	dataArch  = 4
	dataArg1l = 24
)

// archCalls are the refused calls' numbers on one architecture.
type archCalls struct {
	arch uint32
	// mask clears x32's bit on x86-64: x32 calls are x86-64's numbers
	// with it set (and fallocate's mode in the same place).
	mask      uint32
	setxattr  [4]uint32 // setxattr, lsetxattr, fsetxattr, setxattrat
	ioUring   [3]uint32 // io_uring_setup, io_uring_enter, io_uring_register
	fallocate uint32
}

// filterCalls cover every architecture a Linux host of ours runs
// commands in: x86-64 with x32 and i386 beside it, arm64 with 32-bit
// ARM (EABI) beside it. setxattrat and io_uring have one number
// everywhere.
var filterCalls = []archCalls{
	{auditArchX8664, ^uint32(x32Bit), [4]uint32{188, 189, 190, 463}, [3]uint32{425, 426, 427}, 285},
	{auditArchI386, ^uint32(0), [4]uint32{226, 227, 228, 463}, [3]uint32{425, 426, 427}, 324},
	{auditArchAArch64, ^uint32(0), [4]uint32{5, 6, 7, 463}, [3]uint32{425, 426, 427}, 47},
	{auditArchARM, ^uint32(0), [4]uint32{226, 227, 228, 463}, [3]uint32{425, 426, 427}, 352},
}

type bpfInsn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// archBlock is the length of one architecture's block in the program.
const archBlock = 18

// noXattrFilter is the program (every refusal above, not only the
// attributes), in the host's byte order (x86-64 and arm64 are
// little-endian).
func noXattrFilter() []byte {
	var p []bpfInsn
	// An architecture the filter does not know is let through: its
	// numbers would mean other calls.
	for _, a := range filterCalls {
		// Jumps count from the next instruction. The block's last three
		// (at 15, 16, 17) are allow, EOPNOTSUPP and ENOSYS.
		p = append(p,
			bpfInsn{code: bpfLdAbsW, k: dataArch},                    // 0
			bpfInsn{code: bpfJeqK, k: a.arch, jf: archBlock - 2},     // 1: to the next block
			bpfInsn{code: bpfLdAbsW, k: dataNr},                      // 2
			bpfInsn{code: bpfAndK, k: a.mask},                        // 3
			bpfInsn{code: bpfJeqK, k: a.setxattr[0], jt: 16 - 4 - 1}, // 4
			bpfInsn{code: bpfJeqK, k: a.setxattr[1], jt: 16 - 5 - 1}, // 5
			bpfInsn{code: bpfJeqK, k: a.setxattr[2], jt: 16 - 6 - 1}, // 6
			bpfInsn{code: bpfJeqK, k: a.setxattr[3], jt: 16 - 7 - 1}, // 7
			bpfInsn{code: bpfJeqK, k: a.ioUring[0], jt: 17 - 8 - 1},  // 8
			bpfInsn{code: bpfJeqK, k: a.ioUring[1], jt: 17 - 9 - 1},  // 9
			bpfInsn{code: bpfJeqK, k: a.ioUring[2], jt: 17 - 10 - 1}, // 10
			bpfInsn{code: bpfJeqK, k: a.fallocate, jt: 1},            // 11: to 13
			bpfInsn{code: bpfRetK, k: seccompAllow},                  // 12
			bpfInsn{code: bpfLdAbsW, k: dataArg1l},                   // 13: fallocate's mode
			bpfInsn{code: bpfJeqK, k: fallocPunchKeep, jt: 0, jf: 1}, // 14
			bpfInsn{code: bpfRetK, k: seccompAllow},                  // 15
			bpfInsn{code: bpfRetK, k: seccompErrno | errnoNotSup},    // 16
			bpfInsn{code: bpfRetK, k: seccompErrno | errnoNoSys},     // 17
		)
	}
	p = append(p, bpfInsn{code: bpfRetK, k: seccompAllow})
	b := make([]byte, 0, 8*len(p))
	for _, in := range p {
		b = binary.LittleEndian.AppendUint16(b, in.code)
		b = append(b, in.jt, in.jf)
		b = binary.LittleEndian.AppendUint32(b, in.k)
	}
	return b
}

// SeccompProgram is the classic BPF program (struct sock_filter entries,
// little-endian) every sandboxed command runs under, for inspection.
func SeccompProgram() []byte { return noXattrFilter() }

// seccompPipe is a pipe whose read end holds prog, for bwrap's --seccomp.
func seccompPipe(prog []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(prog)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}
