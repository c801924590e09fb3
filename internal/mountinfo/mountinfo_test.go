package mountinfo

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	table := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
31 22 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate
40 22 7:3 / /homes/agent\0401 rw - ext4 /dev/loop3
not a mount line
41 22 7:4 / /short rw -
`
	got, err := Parse(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Root: "/", Point: "/", FSType: "ext4", Source: "/dev/vda", SuperOpts: "rw"},
		{Root: "/", Point: "/sys/fs/cgroup/memory", FSType: "cgroup", Source: "cgroup", SuperOpts: "rw,memory"},
		{Root: "/", Point: "/sys/fs/cgroup", FSType: "cgroup2", Source: "cgroup2", SuperOpts: "rw,nsdelegate"},
		{Root: "/", Point: "/homes/agent 1", FSType: "ext4", Source: "/dev/loop3"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v", got, want)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`a\040b`: "a b", `\134`: `\`, `end\04`: `end\04`, `\999`: `\999`, `plain`: "plain", `/a\040b\134c`: `/a b\c`} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skip("no /proc/self/mountinfo here")
	}
	ms, err := Read()
	if err != nil || len(ms) == 0 {
		t.Fatalf("Read: %d mounts, %v", len(ms), err)
	}
	if !strings.HasPrefix(ms[0].Point, "/") {
		t.Errorf("first mount point %q", ms[0].Point)
	}
}
