package sandbox

import (
	"encoding/binary"
	"os"
)

// The classic BPF that bwrap loads with --seccomp: every call is allowed
// but those that set an extended attribute, which fail with ENOTSUP (as
// on a file system without them). A home's quota is a count the worker
// keeps where the kernel bounds nothing (the estimate): a 0-byte file
// can hold megabytes of attributes, which tmpfs charges to its inodes,
// and a writer of them outruns the worker's first look. Reading,
// listing and removing attributes stay allowed.
const (
	bpfLdAbsW = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfAndK   = 0x54 // BPF_ALU | BPF_AND | BPF_K
	bpfJeqK   = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfRetK   = 0x06 // BPF_RET | BPF_K

	seccompAllow = 0x7fff0000
	seccompErrno = 0x00050000
	errnoNotSup  = 95 // EOPNOTSUPP, ENOTSUP

	auditArchX8664   = 0xc000003e
	auditArchI386    = 0x40000003
	auditArchAArch64 = 0xc00000b7
	x32Bit           = 0x40000000
)

// setxattrCalls are the numbers of setxattr, lsetxattr, fsetxattr and
// setxattrat on each architecture the filter knows (setxattrat has one
// number everywhere).
var setxattrCalls = []struct {
	arch uint32
	nrs  [4]uint32
}{
	{auditArchX8664, [4]uint32{188, 189, 190, 463}},
	{auditArchI386, [4]uint32{226, 227, 228, 463}},
	{auditArchAArch64, [4]uint32{5, 6, 7, 463}},
}

type bpfInsn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// noXattrFilter is the program, in the host's byte order (x86-64 and
// arm64 are little-endian).
func noXattrFilter() []byte {
	var p []bpfInsn
	// An architecture the filter does not know is let through: its
	// numbers would mean other calls.
	for _, a := range setxattrCalls {
		p = append(p,
			bpfInsn{code: bpfLdAbsW, k: 4},                  // seccomp_data.arch
			bpfInsn{code: bpfJeqK, k: a.arch, jt: 0, jf: 8}, // to the next block
			bpfInsn{code: bpfLdAbsW, k: 0},                  // seccomp_data.nr
			bpfInsn{code: bpfAndK, k: ^uint32(x32Bit)},
			bpfInsn{code: bpfJeqK, k: a.nrs[0], jt: 4},
			bpfInsn{code: bpfJeqK, k: a.nrs[1], jt: 3},
			bpfInsn{code: bpfJeqK, k: a.nrs[2], jt: 2},
			bpfInsn{code: bpfJeqK, k: a.nrs[3], jt: 1},
			bpfInsn{code: bpfRetK, k: seccompAllow},
		)
		// The deny after each architecture's block: jt lands on it.
		p = append(p, bpfInsn{code: bpfRetK, k: seccompErrno | errnoNotSup})
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
