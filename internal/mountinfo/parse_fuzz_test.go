package mountinfo

import (
	"strings"
	"testing"
)

// FuzzParse: any table parses without a panic, and every mount it keeps
// names a file system type of one field.
func FuzzParse(f *testing.F) {
	f.Add("22 1 8:1 / / rw - ext4 /dev/vda rw\n40 22 7:3 / /h/a\\0401 rw - ext4 /dev/loop3\n")
	f.Add("- - - - - - -\n\\\\\\ \\04 \\777\n")
	f.Fuzz(func(t *testing.T, table string) {
		ms, err := Parse(strings.NewReader(table))
		if err != nil {
			return
		}
		if len(ms) > strings.Count(table, "\n")+1 {
			t.Fatalf("%d mounts from %d lines", len(ms), strings.Count(table, "\n")+1)
		}
		for _, m := range ms {
			if m.FSType == "" || strings.ContainsAny(m.FSType, " \t\n") {
				t.Fatalf("file system type %q", m.FSType)
			}
		}
	})
}
