package computer

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// parseEvents reads what the kernel wrote, but the names in it are the
// command's: whatever the bytes, it neither panics nor reads past them,
// and every name it gives is NUL-free and within the buffer.
func FuzzParseEvents(f *testing.F) {
	ev := func(wd int32, mask uint32, name string, pad int) []byte {
		b := make([]byte, unix.SizeofInotifyEvent+len(name)+pad)
		binary.NativeEndian.PutUint32(b[0:], uint32(wd))
		binary.NativeEndian.PutUint32(b[4:], mask)
		binary.NativeEndian.PutUint32(b[12:], uint32(len(name)+pad))
		copy(b[unix.SizeofInotifyEvent:], name)
		return b
	}
	f.Add(append(ev(1, unix.IN_CREATE, "f0", 14), ev(2, unix.IN_MODIFY, "", 0)...))
	f.Add(ev(1, unix.IN_Q_OVERFLOW, "", 0))
	f.Add(ev(-1, ^uint32(0), "a\x00b", 1)[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		parseEvents(b, func(wd int32, mask uint32, name string) {
			total += unix.SizeofInotifyEvent + len(name)
			for i := range len(name) {
				if name[i] == 0 {
					t.Fatalf("name %q holds a NUL", name)
				}
			}
		})
		if total > len(b) {
			t.Fatalf("events of %d bytes from %d", total, len(b))
		}
	})
}

// The padding after a name is cut, and events follow one another.
func TestParseEvents(t *testing.T) {
	var b []byte
	for _, e := range []struct {
		name string
		pad  int
	}{{"f0", 14}, {"", 0}, {"dir", 13}} {
		h := make([]byte, unix.SizeofInotifyEvent+len(e.name)+e.pad)
		binary.NativeEndian.PutUint32(h[0:], 7)
		binary.NativeEndian.PutUint32(h[4:], unix.IN_CREATE)
		binary.NativeEndian.PutUint32(h[12:], uint32(len(e.name)+e.pad))
		copy(h[unix.SizeofInotifyEvent:], e.name)
		b = append(b, h...)
	}
	var got []string
	parseEvents(b, func(wd int32, mask uint32, name string) {
		if wd != 7 || mask != unix.IN_CREATE {
			t.Errorf("event %d %x", wd, mask)
		}
		got = append(got, name)
	})
	if len(got) != 3 || got[0] != "f0" || got[1] != "" || got[2] != "dir" {
		t.Errorf("names %q", got)
	}
	// A truncated event is left out.
	n := 0
	parseEvents(b[:len(b)-1], func(int32, uint32, string) { n++ })
	if n != 2 {
		t.Errorf("%d events from a cut buffer, want 2", n)
	}
}
