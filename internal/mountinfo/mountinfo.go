package mountinfo

import (
	"bufio"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Mount is one mount of the table.
type Mount struct {
	Root, Point, FSType, Source string
	// SuperOpts is the file system's options, comma-separated ("" when
	// the line has none).
	SuperOpts string
}

// Read returns this process's mounts, in the kernel's order.
func Read() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Parse reads a mountinfo table; a line that is not a mount's is skipped.
func Parse(r io.Reader) ([]Mount, error) {
	var ms []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root point opts [optional...] - fstype source superopts
		l := strings.Fields(sc.Text())
		sep := slices.Index(l, "-")
		if sep < 5 || len(l) < sep+3 {
			continue
		}
		m := Mount{Root: unescape(l[3]), Point: unescape(l[4]), FSType: l[sep+1], Source: unescape(l[sep+2])}
		if len(l) > sep+3 {
			m.SuperOpts = l[sep+3]
		}
		ms = append(ms, m)
	}
	return ms, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
