// Package web provides the web category: web_fetch, which reads a page
// as text, and web_search, which asks a search provider.
//
// The category is built once from a Config (New) and contributes its
// tools to any turn, main or workflow task, that binds "web", and only
// the tools the configuration offers: web_fetch when Config.Fetch is set,
// web_search when a provider is configured (Config.SearchURL for a
// SearXNG instance, or Config.Search for any Provider). With neither, the
// category contributes nothing.
//
// web_fetch is safe against server-side request forgery by construction:
// its client dials through a guard (internal/netguard) that resolves the host itself, refuses
// the whole name when any address it resolves to is loopback, private
// (RFC 1918, RFC 4193), link-local (169.254.0.0/16 with the cloud
// metadata address, fe80::/10), multicast, unspecified, CGNAT
// (100.64.0.0/10), reserved or documentation space, or an IPv6 form that
// embeds one of those (IPv4-mapped, NAT64, 6to4), and then dials the
// address it checked, so a later lookup cannot rebind it. Redirects are
// dialed through the same guard, so a redirect to such an address is
// refused too, before any connection. Config.Allow lets the operator open
// ranges, addresses, host names or name suffixes, each optionally for one
// port. No proxy from the environment is used.
//
// Data flows like this: the URL is checked (http or https), fetched with
// a time limit (Config.Timeout) and a redirect limit, and the body is read
// up to Config.MaxBytes. Its media type (sniffed when missing or generic)
// decides the rendering: HTML becomes Markdown (main content only, no
// scripts, styles, navigation, forms or hidden elements, links made
// absolute), JSON is pretty-printed, text passes through, all decoded to
// UTF-8 from the declared charset; binary types are refused with a
// message. The model gets at most Config.OutputBudget bytes, with a note
// giving the offset to read on; the details hold the status, type, sizes,
// final URL and truncation flags.
//
// web_search's SearXNG provider is an operator's service, usually on a
// private network, so it is called with a plain client, not the guard.
package web
