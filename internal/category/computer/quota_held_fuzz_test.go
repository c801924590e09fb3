package computer

import (
	"testing"

	"golang.org/x/sys/unix"
)

// heldMaps reads /proc/<pid>/maps, whose paths are the command's (a file
// may be named "x (deleted)", hold spaces or look like a mapping):
// whatever the bytes, it neither panics nor gives an inode twice, a
// size below zero or one of another device.
func FuzzHeldMaps(f *testing.F) {
	f.Add([]byte("7f0000000000-7f0000400000 rw-s 00000000 00:2f 12345 /home/a/h0 (deleted)\n"+
		"7f0000400000-7f0000800000 rw-s 00400000 00:2f 12345 /home/a/h0 (deleted)\n"+
		"55e000000000-55e000001000 r-xp 00000000 08:01 99 /usr/bin/python3\n"), uint32(0), uint32(0x2f))
	f.Add([]byte("ffffffffffffffff-0 rw-s ffffffffffffffff 00:2f 1 x (deleted)\n0-ffffffffffffffff rw-s ffffffffffffffff 0:2f 2 (deleted)"), uint32(0), uint32(0x2f))
	f.Add([]byte(" (deleted)\n\n- - - : 0 (deleted)"), uint32(1), uint32(2))
	f.Fuzz(func(t *testing.T, b []byte, major, minor uint32) {
		dev := unix.Mkdev(major, minor)
		seen := map[uint64]bool{}
		for _, m := range heldMaps(b, dev) {
			if seen[m.ino] {
				t.Fatalf("inode %d given twice", m.ino)
			}
			seen[m.ino] = true
			if m.size < 0 || m.ino == 0 {
				t.Fatalf("mapping %+v", m)
			}
		}
	})
}

// A deleted file mapped twice counts once, as far as its mappings
// reach; other devices, files not deleted and malformed lines count
// nothing.
func TestHeldMaps(t *testing.T) {
	maps := "7f0000000000-7f0000400000 rw-s 00000000 00:2f 12345 /home/a/h0 (deleted)\n" +
		"7f0000400000-7f0000500000 rw-s 00400000 00:2f 12345 /home/a/h0 (deleted)\n" +
		"7f0000600000-7f0000601000 rw-s 00000000 00:30 7 /tmp/x (deleted)\n" +
		"7f0000700000-7f0000701000 rw-s 00000000 00:2f 8 /home/a/live\n" +
		"garbage (deleted)\n"
	got := heldMaps([]byte(maps), unix.Mkdev(0, 0x2f))
	if len(got) != 1 || got[0].ino != 12345 || got[0].size != 5<<20 {
		t.Fatalf("heldMaps: %+v, want inode 12345 reaching 5 MiB", got)
	}
}
