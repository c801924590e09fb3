package computer

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// withoutDACOverride runs fn on a thread of its own whose effective
// capabilities lack CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: as a worker
// that is not root, or root in a container without them, reads a home.
func withoutDACOverride(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: the test drops root's capabilities on one thread to read a home as a worker without them; it needs root")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			t.Error(err)
			return
		}
		data[0].Effective &^= 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			t.Error(err)
			return
		}
		fn()
	}()
	<-done
}

// A command made a directory of its home unreadable (chmod 300) and wrote
// 8 MiB into it: a worker without the capability to read it still counts
// it (it gives the directory read for the walk's open and sets its mode
// back), so the home is over and write_file is refused; the neighbour's
// home is untouched.
func TestQuotaUnreadableDirectoryCounted(t *testing.T) {
	hs, err := openHomes(filepath.Join(t.TempDir(), "homes"), slog.New(slog.DiscardHandler), nil, newQuotas(4<<20, 1000))
	if err != nil {
		t.Fatal(err)
	}
	defer hs.close()
	h, err := hs.open("a1")
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	h2, err := hs.open("a2")
	if err != nil {
		t.Fatal(err)
	}
	defer h2.close()
	hidden := filepath.Join(h.dir, "hidden")
	if err := os.Mkdir(hidden, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hidden, "big"), make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(hidden, 0o300); err != nil {
		t.Fatal(err)
	}
	withoutDACOverride(t, func() {
		if _, err := os.ReadDir(hidden); err == nil {
			t.Error("the thread still reads a chmod 300 directory: the capabilities were not dropped")
			return
		}
		u, _ := hs.quota.recount(h)
		if u.bytes < 8<<20 || u.blind != 0 {
			t.Errorf("a home with 8 MiB in a chmod 300 directory counts %d bytes (%d directories unread)", u.bytes, u.blind)
		}
		if err := hs.quota.admit(h, 5, 1); err == nil {
			t.Error("write_file of 5 bytes accepted in a home over its 4 MiB quota")
		}
		if err := hs.quota.admit(h2, 5, 1); err != nil {
			t.Errorf("the neighbour's write_file of 5 bytes: %v", err)
		}
	})
	if fi, err := os.Stat(hidden); err != nil || fi.Mode().Perm() != 0o300 {
		t.Errorf("the directory's mode after the walk: %v %v, want 0300 kept", fi.Mode().Perm(), err)
	}
}
