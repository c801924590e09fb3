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

// A command whose home is a file system of its own is not paced for its
// home's bounds, which the kernel holds, however near them it is, nor
// held while its follower is behind; it is paced for the disk the homes
// share.
func TestKernelHomeNotPaced(t *testing.T) {
	for _, c := range []struct {
		name       string
		start, est usage
		own        bool
		want       float64
	}{
		{"a quarter of its entries made", usage{}, usage{files: 1500}, false, paceTenth},
		{"a quarter of its entries made, its own file system", usage{}, usage{files: 1500}, true, 0},
		{"in the last eighth from the start", usage{files: 4500}, usage{files: 4500}, false, paceTenth},
		{"in the last eighth from the start, its own file system", usage{files: 4500}, usage{files: 4500}, true, 0},
		{"over from the start", usage{files: 6000}, usage{files: 6000}, false, paceOver},
		{"over from the start, its own file system", usage{files: 6000}, usage{files: 6000}, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &follower{q: emptyQuotas(64<<20, 5000), h: &home{ownFS: c.own}, start: c.start, est: c.est}
			if got := w.paceFor(); got != c.want {
				t.Errorf("paced at %v cores, want %v", got, c.want)
			}
			w.pace.fn = func(float64) error { return nil }
			if held := w.holdCPU(); held == c.own {
				t.Errorf("held while the follower is behind: %v", held)
			}
		})
	}
	// A shared disk below four times its reserve (a reserve of all of
	// it), and a command that grew its home by 2 MiB.
	q := emptyQuotas(64<<20, 5000)
	q.fsDir, q.reserve = t.TempDir(), 1<<50
	w := &follower{q: q, h: &home{ownFS: true}, est: usage{bytes: 2 << 20}}
	if got := w.paceFor(); got != paceTenth {
		t.Errorf("on a disk below its reserve, paced at %v cores, want %v", got, paceTenth)
	}
}
