//go:build unix

package worker

import (
	"path/filepath"
	"syscall"
)

// sameFileSystem reports whether a and b (or, for one not yet made, its
// nearest existing parent) are on one file system.
func sameFileSystem(a, b string) bool {
	dev := func(p string) (uint64, bool) {
		for p, _ = filepath.Abs(p); ; p = filepath.Dir(p) {
			var st syscall.Stat_t
			if err := syscall.Stat(p, &st); err == nil {
				return uint64(st.Dev), true
			}
			if p == filepath.Dir(p) {
				return 0, false
			}
		}
	}
	da, oka := dev(a)
	db, okb := dev(b)
	return oka && okb && da == db
}
