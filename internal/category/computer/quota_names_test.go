package computer

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// Entries made while a walk counts them raise events the follower reads
// after the walk: each is counted once, not by the walk and again by its
// event (which stopped writers of empty files at 4,005 and 4,398 of
// their 5,000 entries). The same holds for the entries of a directory
// listed when its watch came, and for deletions read after a walk that
// no longer saw their entries; an entry made after the walk still
// counts.
func TestFollowerCountsEachEntryOnce(t *testing.T) {
	c, err := New(Config{Root: t.TempDir(), HomeQuotaFiles: 5000, QuotaMode: QuotaEstimate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	h, err := c.homes.open("a")
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	w := c.homes.quota.follow(h)
	if w == nil || w.f == nil {
		t.Skip("SKIPPING: no inotify instance here: the events' count is not tested")
	}
	defer w.close()
	w.walk(false)
	buf := make([]byte, 64<<10)
	mk := func(dir string, n int) {
		for i := range n {
			if err := os.WriteFile(filepath.Join(h.dir, dir, "f"+strconv.Itoa(i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 600 files and a directory of 300: their events are queued, the
	// walk counts them, then the events are read.
	mk(".", 600)
	if err := os.Mkdir(filepath.Join(h.dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.drain(buf) // d is watched and listed (empty), its files to come
	mk("d", 300)
	w.walk(false)
	w.drain(buf)
	if got, want := w.est.files, int64(901); got != want {
		t.Errorf("after the walk and the events queued during it: %d entries, want %d", got, want)
	}
	// 100 deleted before a walk, their events read after it; 50 made
	// after it.
	for i := range 100 {
		if err := os.Remove(filepath.Join(h.dir, "f"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	w.walk(false)
	mk("d", 350) // 300 rewritten, 50 new
	w.drain(buf)
	if got, want := w.est.files, int64(851); got != want {
		t.Errorf("after deletions before a walk and entries after it: %d entries, want %d", got, want)
	}
	if u := c.homes.quota.walk(h); u.files != w.est.files {
		t.Errorf("a walk counts %d entries, the estimate %d", u.files, w.est.files)
	}
}
