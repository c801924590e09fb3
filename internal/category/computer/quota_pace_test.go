package computer

import "testing"

// A command held while its follower is behind keeps next to nothing (the
// attacks the hold is for run in homes of a few MiB or thousands of
// entries) unless its home has 512 MiB and 20,000 entries of room left,
// then a tenth of a core; never more than its pace.
func TestHoldShareFollowsTheRoom(t *testing.T) {
	for _, c := range []struct {
		name         string
		bytes, files int64 // the quota
		est          usage
		pace         float64
		want         float64
	}{
		{"8 MiB home, empty", 8 << 20, 20_000, usage{}, 0, paceHold},
		{"64 MiB and 5,000 entries, empty", 64 << 20, 5000, usage{}, 0, paceHold},
		{"1 GiB home of 160 MiB, 41,600 entries", 1 << 30, 100_000, usage{bytes: 160 << 20, files: 41_600}, 0, paceTenth},
		{"1 GiB home of 600 MiB", 1 << 30, 100_000, usage{bytes: 600 << 20}, 0, paceHold},
		{"1 GiB home, 85,000 of 100,000 entries", 1 << 30, 100_000, usage{files: 85_000}, 0, paceHold},
		{"over its bytes", 1 << 30, 100_000, usage{bytes: 2 << 30}, 0, paceHold},
		{"no bounds", 0, 0, usage{}, 0, paceTenth},
		{"paced lower already", 1 << 30, 100_000, usage{}, paceOver, paceOver},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got float64
			w := &follower{q: emptyQuotas(c.bytes, c.files), est: c.est}
			w.pace.cores = c.pace
			w.pace.fn = func(cores float64) error { got = cores; return nil }
			if !w.holdCPU() {
				t.Fatal("not held")
			}
			if got != c.want {
				t.Errorf("held at %v cores, want %v", got, c.want)
			}
			w.letGo()
			if got != c.pace {
				t.Errorf("let go at %v cores, want its pace %v", got, c.pace)
			}
		})
	}
}
