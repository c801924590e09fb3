package sandbox_test

import (
	"context"
	"strings"
	"testing"

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
