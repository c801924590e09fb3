// Package netguard provides the public-address policy of the worker's
// outbound connections: a dialer that resolves a host itself, refuses the
// whole name when any address it resolves to is loopback, private
// (RFC 1918, RFC 4193), link-local (169.254.0.0/16 with the cloud
// metadata address, fe80::/10), multicast, unspecified, CGNAT
// (100.64.0.0/10), reserved or documentation space, or an IPv6 form that
// embeds one of those (IPv4-mapped, NAT64, 6to4), and then dials the
// address it checked, so a later lookup cannot rebind it.
//
// An operator's allow-list (ParseAllow) opens ranges, addresses, host
// names or name suffixes, each optionally for one port. web_fetch dials
// through a Guard, and so does the egress proxy of sandboxed commands
// (internal/sandbox): both apply one policy.
package netguard
