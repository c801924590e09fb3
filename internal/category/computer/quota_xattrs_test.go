package computer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// quotaHome is the home "a" of a category without a sandbox, its
// quota counted (cfg's bounds, in a fresh root).
func quotaHome(t testing.TB, cfg Config) (*quotas, *home) {
	t.Helper()
	cfg.Root, cfg.QuotaMode = t.TempDir(), QuotaEstimate
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	h, err := c.homes.open("a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.close)
	return c.homes.quota, h
}

// A walk that takes the attributes of unchanged entries from the last
// walk counts what a walk reading them all counts, whatever changed
// between them: attributes set, grown, removed; files deleted and made
// again (on inodes the file system reuses), renamed, hard-linked;
// directories renamed with what they hold; changes made just before a
// walk (in the racy window) and long before it. And it reads only what
// changed.
func TestXattrCacheMatchesAWalkThatReadsAll(t *testing.T) {
	q, h := quotaHome(t, Config{HomeQuotaFiles: 100_000})
	q.xattrs.racy = 30 * time.Millisecond
	if err := syscall.Setxattr(h.dir, "user.probe", []byte("x"), 0); err != nil {
		t.Skipf("SKIPPING: no user attributes here (%v)", err)
	}
	rng := rand.New(rand.NewPCG(7, 51))
	var paths []string
	for d := range 30 {
		dir := filepath.Join(h.dir, fmt.Sprintf("d%d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range 50 {
			p := filepath.Join(dir, fmt.Sprintf("f%d", f))
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if f%3 == 0 {
				setAttr(t, p, "user.a", rng.IntN(3000))
			}
			paths = append(paths, p)
		}
	}
	compare := func(round string) {
		t.Helper()
		before := q.xattrs.reads.Load()
		cached := q.walkDirs(h, nil, nil, -1, nil, nil)
		reads := q.xattrs.reads.Load() - before
		fresh := emptyQuotas(q.bytes, q.files).walkDirs(h, nil, nil, -1, nil, nil)
		if cached.xattr != fresh.xattr || cached.bytes != fresh.bytes || cached.files != fresh.files {
			t.Fatalf("%s: the cached walk counted %d attribute bytes (%d bytes, %d entries), a walk reading all %d (%d, %d)",
				round, cached.xattr, cached.bytes, cached.files, fresh.xattr, fresh.bytes, fresh.files)
		}
		t.Logf("%s: %d attribute bytes, %d reads for %d entries", round, cached.xattr, reads, cached.files)
	}
	time.Sleep(60 * time.Millisecond) // past the racy window
	compare("first")
	before := q.xattrs.reads.Load()
	compare("unchanged")
	if r := q.xattrs.reads.Load() - before; r > 0 {
		t.Errorf("a walk of an unchanged home read %d entries' attributes, want none", r)
	}
	for round := range 40 {
		for range 15 {
			p := paths[rng.IntN(len(paths))]
			switch op := rng.IntN(7); op {
			case 0, 1: // set or grow
				setAttr(t, p, fmt.Sprintf("user.k%d", rng.IntN(3)), rng.IntN(4000))
			case 2: // remove
				_ = syscall.Removexattr(p, "user.a")
			case 3: // deleted and made again, perhaps on the same inode
				_ = os.Remove(p)
				if err := os.WriteFile(p, []byte("y"), 0o644); err != nil {
					t.Fatal(err)
				}
				setAttr(t, p, "user.n", rng.IntN(4000))
			case 4: // a hard link beside it
				_ = os.Link(p, p+fmt.Sprintf(".l%d", round))
			case 5: // its directory renamed and back
				dir := filepath.Dir(p)
				if os.Rename(dir, dir+".x") == nil {
					_ = os.Rename(dir+".x", dir)
				}
			case 6: // the directory's own attributes
				setAttr(t, filepath.Dir(p), "user.d", rng.IntN(2000))
			}
		}
		if round%2 == 0 {
			time.Sleep(40 * time.Millisecond) // some changes age past the window, some do not
		}
		compare(fmt.Sprintf("round %d", round))
	}
}

func setAttr(t *testing.T, p, name string, n int) {
	t.Helper()
	// ENOSPC: ext4 keeps an inode's attributes in one block.
	if err := syscall.Setxattr(p, name, make([]byte, n), 0); err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
}

// A follower's walk stops once its command has ended: the call does not
// wait for a walk of a big home whose count the walk after the command
// (recount) takes anyway. The walk here cannot finish before the command
// ends (its first tick waits for that end), and must then stop at the
// next tick instead of walking the other 3,000 entries.
func TestFollowerWalkEndsWithTheCommand(t *testing.T) {
	q, h := quotaHome(t, Config{HomeQuotaFiles: 100_000})
	for i := range 3200 {
		if err := os.WriteFile(filepath.Join(h.dir, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	var ticks, after atomic.Int64
	ended := make(chan struct{})
	q.ticked = func() {
		if ticks.Add(1) == 1 {
			cancel(nil) // the command ends while the first walk counts
			<-ended
		}
		if ctx.Err() != nil {
			after.Add(1)
		}
	}
	w := q.follow(h)
	defer w.close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx, cancel)
	}()
	close(ended)
	<-done
	if a := after.Load(); a > 1 {
		t.Errorf("the walk went on for %d ticks (of 32 entries) after its command ended, want it to stop at the first", a)
	}
}
