package computer

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// FuzzResolve fuzzes the whole path from what the model writes to what the
// worker opens: home.rel, then the home's os.Root, then openFile. Whatever
// the path, nothing panics, a NUL is refused, rel's answer is local to the
// home, and anything that opens is a file inside the home (the kernel's
// own name of the open descriptor says so), never one of the traps beside
// it: another home, the homes' root, /etc, a file next to the root.
func FuzzResolve(f *testing.F) {
	tmp := f.TempDir()
	hs, err := openHomes(filepath.Join(tmp, "homes"), slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = hs.close() })
	a2, err := hs.open("a2")
	if err != nil {
		f.Fatal(err)
	}
	a2.close()
	h, err := hs.open("a1")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(h.close)
	must := func(err error) {
		if err != nil {
			f.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(tmp, "outside.txt"), []byte("outside"), 0o644))
	must(os.WriteFile(filepath.Join(hs.dir, "a2", "secret.txt"), []byte("secret"), 0o644))
	must(os.WriteFile(filepath.Join(h.dir, "notes.txt"), []byte("notes"), 0o644))
	must(os.MkdirAll(filepath.Join(h.dir, "sub", "deeper"), 0o755))
	for name, target := range map[string]string{
		"link_out": "../a2", "up": "..", "abs_file": filepath.Join(tmp, "outside.txt"), "abs_dir": "/etc",
		"inlink": "notes.txt", "loop": "loop", "sub/back": "../..", "sub/ok": "../notes.txt",
	} {
		must(os.Symlink(target, filepath.Join(h.dir, name)))
	}
	for _, s := range []string{
		"", " ", ".", "~", "~/", "~/notes.txt", "notes.txt", "./notes.txt", "sub/../notes.txt", "inlink", "sub/ok",
		"..", "../a2/secret.txt", "../../outside.txt", "sub/../../a2/secret.txt", "~/../a2", "~user/x",
		"/etc/passwd", "$HOME/notes.txt", "$HOME/../a2/secret.txt", "$HOME", "$HOME/", "$HOME/sub/../..",
		"link_out/secret.txt", "up/a2/secret.txt", "abs_file", "abs_dir/passwd", "loop", "loop/x", "sub/back/a2",
		"notes.txt\x00../../outside.txt", "\x00", `"notes.txt"`, `"..\/a2"`, `"\x00"`, `"~"`, `"sub/\n"`, `"unterminated`, "a\\..\\..\\b", "//etc/passwd", "sub//deeper/", "…/..", " ../x ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		p = strings.ReplaceAll(p, "$HOME", h.dir)
		rel, err := h.rel(p)
		if strings.ContainsRune(p, 0) && err == nil {
			t.Fatalf("rel(%q) accepted a NUL byte: %q", p, rel)
		}
		if err != nil {
			return
		}
		if rel != "." && !filepath.IsLocal(rel) {
			t.Fatalf("rel(%q) = %q, not local to the home", p, rel)
		}
		// O_NONBLOCK as the tools open: the home holds no FIFO, but no
		// input may hang the fuzzer either.
		if fd, err := h.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			inside(t, p, fd, h.dir)
			_ = fd.Close()
		}
		if fd, _, err := h.openFile("read", p, rel, os.O_RDONLY, 0); err == nil {
			inside(t, p, fd, h.dir)
			_ = fd.Close()
		}
		if fd, err := h.openDir(rel); err == nil {
			inside(t, p, fd, h.dir)
			_ = fd.Close()
		}
	})
}

// inside fails unless the open file fd is dir or beneath it.
func inside(t *testing.T, p string, fd *os.File, dir string) {
	t.Helper()
	name, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := filepath.Rel(dir, name); err != nil || r != "." && !filepath.IsLocal(r) {
		t.Fatalf("the path %q opened %s, outside the home %s", p, name, dir)
	}
}

// FuzzShownName: every name list_files shows, however it is shown, is
// taken back by the file tools as that very name.
func FuzzShownName(f *testing.F) {
	hs, err := openHomes(filepath.Join(f.TempDir(), "homes"), slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = hs.close() })
	h, err := hs.open("a1")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(h.close)
	for _, s := range []string{"plain", "a\nb", "\xff\xfe", `"q"`, " lead", "trail ", "~", "a -> b", "x  (1 byte)", "tab\t", "\u00a0", `\`, "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
			return // not a name a directory can hold (NAME_MAX is 255 bytes)
		}
		shown := shownName(name)
		if strings.ContainsAny(shown, "\n\r") {
			t.Fatalf("%q is shown as %q, which breaks the listing's lines", name, shown)
		}
		rel, err := h.rel(shown)
		if err != nil || rel != name {
			t.Fatalf("%q is shown as %q, which the file tools take as %q (%v)", name, shown, rel, err)
		}
	})
}
