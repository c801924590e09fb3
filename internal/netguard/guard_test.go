package netguard

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestBlockedReason(t *testing.T) {
	tests := []struct {
		addr   string
		reason string // "" means public
	}{
		{"127.0.0.1", "loopback"},
		{"127.5.6.7", "loopback"},
		{"::1", "loopback"},
		{"10.0.0.1", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fc00::1", "private"},
		{"fd00:ec2::254", "private"}, // AWS's IPv6 metadata address
		{"169.254.169.254", "metadata"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this network"},
		{"::", "unspecified"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"100.127.255.254", "carrier-grade NAT"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved"},
		{"192.0.2.10", "documentation"},
		{"198.18.0.1", "benchmarking"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.1.2.3", "private"},
		{"::ffff:169.254.169.254", "metadata"},
		{"::ffff:100.64.0.1", "carrier-grade NAT"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"64:ff9b::7f00:1", "loopback address (through NAT64)"},
		{"64:ff9b::a9fe:a9fe", "metadata address (through NAT64)"},
		{"2002:7f00:1::", "loopback address (through 6to4)"},
		{"2002:a00:1::", "private network address (through 6to4)"},
		{"2001:db8::1", "documentation"},
		{"2001::1", "Teredo"},
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"93.184.216.34", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"172.32.0.1", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""},
		{"2606:4700:4700::1111", ""},
		{"2002:808:808::", ""},
	}
	for _, tt := range tests {
		got := BlockedReason(netip.MustParseAddr(tt.addr))
		if tt.reason == "" && got != "" || tt.reason != "" && !strings.Contains(got, tt.reason) {
			t.Errorf("%s: %q, want one containing %q", tt.addr, got, tt.reason)
		}
	}
}

func TestAllowList(t *testing.T) {
	allow, err := ParseAllow([]string{"10.1.0.0/16", "127.0.0.1:8080", "[::1]:9090", "fd00::5", "intranet.example", "*.corp.example:8443", " ", "Wiki.Example."})
	if err != nil {
		t.Fatal(err)
	}
	g := New(allow, nil)
	tests := []struct {
		host string
		addr string
		port uint16
		ok   bool
	}{
		{"10.1.2.3", "10.1.2.3", 80, true},
		{"10.2.0.1", "10.2.0.1", 80, false},
		{"127.0.0.1", "127.0.0.1", 8080, true},
		{"127.0.0.1", "127.0.0.1", 8081, false},
		{"::ffff:127.0.0.1", "::ffff:127.0.0.1", 8080, true},
		{"::1", "::1", 9090, true},
		{"::1", "::1", 80, false},
		{"fd00::5", "fd00::5", 1, true},
		{"intranet.example", "10.9.9.9", 80, true},
		{"INTRANET.example.", "10.9.9.9", 443, true},
		{"other.example", "10.9.9.9", 80, false},
		{"git.corp.example", "10.3.3.3", 8443, true},
		{"git.corp.example", "10.3.3.3", 443, false},
		{"corp.example", "10.3.3.3", 8443, false},
		{"wiki.example", "192.168.0.1", 80, true},
		{"public.example", "8.8.8.8", 80, true},
	}
	for _, tt := range tests {
		err := g.Check(tt.host, netip.MustParseAddr(tt.addr), tt.port)
		if (err == nil) != tt.ok {
			t.Errorf("%s (%s) port %d: %v, want allowed=%v", tt.host, tt.addr, tt.port, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrBlocked) {
			t.Errorf("%v does not wrap ErrBlocked", err)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "host:0", "host:http", "a/b", "*."} {
		if _, err := ParseAllow([]string{bad}); err == nil {
			t.Errorf("ParseAllow(%q) accepted it", bad)
		}
	}
}

// fakeResolver answers from a table and counts lookups.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

// A name with any forbidden address is refused before anything is
// dialed, whatever else it resolves to.
func TestDialRefusesBeforeConnecting(t *testing.T) {
	g := New(nil, fakeResolver{
		"rebind.example": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("127.0.0.1")},
		"meta.example":   {netip.MustParseAddr("169.254.169.254")},
		"mapped.example": {netip.MustParseAddr("::ffff:10.0.0.1")},
	})
	for _, addr := range []string{"rebind.example:80", "meta.example:80", "mapped.example:443", "10.0.0.1:80", "[fe80::1]:80", "0.0.0.0:80"} {
		// A dial that got as far as connecting would not fail at once
		// with ErrBlocked: 93.184.216.34 and 10.0.0.1 are not reachable
		// from the test machine.
		c, err := g.DialContext(context.Background(), "tcp", addr)
		if c != nil {
			c.Close()
		}
		if !errors.Is(err, ErrBlocked) {
			t.Errorf("dial %s: %v, want ErrBlocked", addr, err)
		}
	}
}

func FuzzAllowEntry(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "127.0.0.1:8080", "[::1]:9", "*.corp.example", "host", "a:b:c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseEntry(s)
		if err != nil {
			return
		}
		if !e.prefix.IsValid() && e.host == "" {
			t.Errorf("%q parsed to an entry that matches nothing", s)
		}
	})
}
