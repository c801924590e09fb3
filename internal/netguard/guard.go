package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// ErrBlocked is wrapped by every refusal of the address guard.
var ErrBlocked = errors.New("address not allowed")

// BlockedError says which host was refused and why: each address it
// resolved to is outside the public internet and not allow-listed.
type BlockedError struct {
	Host   string
	Addr   netip.Addr
	Reason string
}

func (e *BlockedError) Error() string {
	if e.Host == e.Addr.String() {
		return fmt.Sprintf("%s is %s", e.Host, e.Reason)
	}
	return fmt.Sprintf("%s resolves to %s, %s", e.Host, e.Addr, e.Reason)
}

func (e *BlockedError) Unwrap() error { return ErrBlocked }

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// special are the ranges that are not the public internet, beyond what
// netip.Addr's own predicates cover (loopback, private, link-local,
// multicast, unspecified), with the reason the model is told.
var special = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT (shared) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible IPv6 address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
}

var (
	nat64  = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}
	sixTo4 = netip.MustParsePrefix("2002::/16")
)

// BlockedReason says why a is not a public internet address, or "" when
// it is one. IPv6 forms that embed an IPv4 address (IPv4-mapped, NAT64,
// 6to4) are judged by the address they embed.
func BlockedReason(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	switch {
	case !a.IsValid():
		return "not an address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsUnspecified():
		return "an unspecified address"
	case a.IsPrivate():
		return "a private network address"
	case a == netip.AddrFrom4([4]byte{169, 254, 169, 254}):
		return "the cloud metadata address"
	case a.IsLinkLocalUnicast():
		return "a link-local address (cloud metadata lives there)"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.reason
		}
	}
	if a.Is6() {
		b := a.As16()
		for _, p := range nat64 {
			if p.Contains(a) {
				if r := BlockedReason(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})); r != "" {
					return r + " (through NAT64)"
				}
			}
		}
		if sixTo4.Contains(a) {
			if r := BlockedReason(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})); r != "" {
				return r + " (through 6to4)"
			}
		}
	}
	return ""
}

// entry is one entry of the operator's allow-list.
type entry struct {
	prefix netip.Prefix // an address range, or
	host   string       // a host name, lower case; "*.x" matches below x
	port   uint16       // 0: any port
}

// ParseAllow reads allow-list entries: "10.0.0.0/8", "127.0.0.1",
// "[::1]", "intranet.example", "*.corp.example", each optionally with
// ":port" ("127.0.0.1:8080", "[::1]:8080", "intranet.example:8443").
func ParseAllow(entries []string) (Allow, error) {
	var out []entry
	var errs []error
	for _, raw := range entries {
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		e, err := parseEntry(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("allow-list entry %q: %w", raw, err))
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

func parseEntry(s string) (entry, error) {
	var e entry
	if p, err := netip.ParsePrefix(s); err == nil {
		e.prefix = p.Masked()
		return e, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		e.prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		return e, nil
	}
	host := s
	if h, port, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return e, fmt.Errorf("port %q is not a port", port)
		}
		host, e.port = h, uint16(n)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		e.prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		return e, nil
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	name := strings.TrimPrefix(host, "*.")
	if name == "" || strings.ContainsAny(name, "/*[]: ") {
		return e, errors.New("not an address, a range, a host name or *.domain")
	}
	e.host = host
	return e, nil
}

// Allow is a parsed allow-list: the addresses beyond the public internet
// a Guard may dial.
type Allow []entry

// Guard dials only public addresses, or those the allow-list names. It
// resolves a name itself and dials the address it checked, so what is
// checked is what is connected to (no second lookup to rebind).
type Guard struct {
	allow    Allow
	resolver Resolver
	dialer   *net.Dialer
}

// New returns a guard over allow that resolves names with r
// (net.DefaultResolver when nil).
func New(allow Allow, r Resolver) *Guard {
	if r == nil {
		r = net.DefaultResolver
	}
	return &Guard{allow: allow, resolver: r, dialer: &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}}
}

// hostAllowed reports whether the allow-list names host (with port).
func (g *Guard) hostAllowed(host string, port uint16) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, e := range g.allow {
		if e.host == "" || e.port != 0 && e.port != port {
			continue
		}
		if suffix, wild := strings.CutPrefix(e.host, "*."); wild {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if host == e.host {
			return true
		}
	}
	return false
}

// addrAllowed reports whether the allow-list covers a (with port).
func (g *Guard) addrAllowed(a netip.Addr, port uint16) bool {
	a = a.Unmap().WithZone("")
	for _, e := range g.allow {
		if e.prefix.IsValid() && e.prefix.Contains(a) && (e.port == 0 || e.port == port) {
			return true
		}
	}
	return false
}

// Check returns nil when host:port at a may be dialed.
func (g *Guard) Check(host string, a netip.Addr, port uint16) error {
	if g.hostAllowed(host, port) || g.addrAllowed(a, port) {
		return nil
	}
	if r := BlockedReason(a); r != "" {
		return &BlockedError{Host: host, Addr: a.Unmap().WithZone(""), Reason: r}
	}
	return nil
}

// DialContext is a transport's dialer: it resolves addr's host, refuses
// every address the policy forbids before any connection is tried, and
// dials the allowed ones in turn.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portS, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port64, err := strconv.ParseUint(portS, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portS, err)
	}
	port := uint16(port64)
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ipNet := "ip"
		switch network {
		case "tcp4":
			ipNet = "ip4"
		case "tcp6":
			ipNet = "ip6"
		}
		if addrs, err = g.resolver.LookupNetIP(ctx, ipNet, host); err != nil {
			return nil, err
		}
	}
	var refused error
	var allowed []netip.Addr
	for _, a := range addrs {
		if err := g.Check(host, a, port); err != nil {
			if refused == nil {
				refused = err
			}
			continue
		}
		allowed = append(allowed, a)
	}
	// A name with one forbidden address is refused as a whole: an
	// attacker who controls its records picks which one is dialed.
	if refused != nil {
		return nil, refused
	}
	if len(allowed) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	var errs []error
	for _, a := range allowed {
		c, err := g.dialer.DialContext(ctx, network, netip.AddrPortFrom(a.WithZone(""), port).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}
