package netpolicy

import (
	"net/netip"
	"slices"
)

// Addresses an allowed name never opens. A DNS answer is data from the
// zone's owner (or whoever hijacked it), so the addresses it names are
// checked before they reach the dns4/dns6 sets: nothing learned from DNS
// may point at the host (its own addresses, slirp4netns's gateway and
// forwarder, which reach host services), the host's LAN, loopback,
// link-local/metadata, or any other special-purpose range. The user can
// still open such a network explicitly with allow_egress, which is not
// filtered here.

// SpecialRange is one entry of the IANA special-purpose address registries
// (plus multicast and the few blocks outside them that are never a public
// server).
type SpecialRange struct {
	Prefix netip.Prefix
	Name   string
}

func sr(p, name string) SpecialRange { return SpecialRange{netip.MustParsePrefix(p), name} }

// Special4 is the IPv4 special-purpose registry (RFC 6890 and updates),
// multicast and the reserved 240/4 (which holds 255.255.255.255).
var Special4 = []SpecialRange{
	sr("0.0.0.0/8", "this network"),
	sr("10.0.0.0/8", "private (RFC 1918)"),
	sr("100.64.0.0/10", "shared address space (CGNAT)"),
	sr("127.0.0.0/8", "loopback"),
	sr("169.254.0.0/16", "link-local (metadata)"),
	sr("172.16.0.0/12", "private (RFC 1918)"),
	sr("192.0.0.0/24", "IETF protocol assignments"),
	sr("192.0.2.0/24", "documentation (TEST-NET-1)"),
	sr("192.31.196.0/24", "AS112-v4"),
	sr("192.52.193.0/24", "AMT"),
	sr("192.88.99.0/24", "6to4 relay anycast"),
	sr("192.168.0.0/16", "private (RFC 1918)"),
	sr("192.175.48.0/24", "direct delegation AS112"),
	sr("198.18.0.0/15", "benchmarking"),
	sr("198.51.100.0/24", "documentation (TEST-NET-2)"),
	sr("203.0.113.0/24", "documentation (TEST-NET-3)"),
	sr("224.0.0.0/4", "multicast"),
	sr("240.0.0.0/4", "reserved and limited broadcast"),
}

// Special6 is the IPv6 special-purpose registry (RFC 6890 and updates),
// multicast, and everything outside global unicast 2000::/3. NAT64
// 64:ff9b::/96 is listed but decided by the IPv4 address it embeds.
var Special6 = []SpecialRange{
	sr("::/128", "unspecified"),
	sr("::1/128", "loopback"),
	sr("::ffff:0:0/96", "IPv4-mapped"),
	sr("64:ff9b::/96", "NAT64 (embeds IPv4)"),
	sr("64:ff9b:1::/48", "local-use NAT64"),
	sr("100::/64", "discard-only"),
	sr("100:0:0:1::/64", "dummy prefix"),
	sr("2001::/23", "IETF protocol assignments (Teredo, ORCHID, benchmarking)"),
	sr("2001:db8::/32", "documentation"),
	sr("2002::/16", "6to4 (embeds IPv4)"),
	sr("2620:4f:8000::/48", "AS112-v6"),
	sr("3fff::/20", "documentation"),
	sr("5f00::/16", "SRv6 SIDs"),
	sr("fc00::/7", "unique local (ULA, metadata fd00:ec2::254)"),
	sr("fe80::/10", "link-local"),
	sr("fec0::/10", "site-local (deprecated)"),
	sr("ff00::/8", "multicast"),
}

var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	globalUni6 = netip.MustParsePrefix("2000::/3")
)

// SlirpAddrs are slirp4netns's own addresses in the namespace (see
// netns.Client.StartUplink): gateway (the host), DNS forwarder, the namespace's
// tap0, and their IPv6 counterparts. The ranges above hold them already;
// they are named so a denial says what they are.
var SlirpAddrs = []netip.Addr{
	netip.MustParseAddr("10.0.2.2"), netip.MustParseAddr("10.0.2.3"), netip.MustParseAddr("10.0.2.100"),
	netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::3"),
}

// LearnFilter decides which addresses from DNS answers may be opened. The
// zero value knows no host addresses.
type LearnFilter struct {
	host []netip.Addr // sorted, unmapped, without zones
}

// NewLearnFilter returns a filter that also refuses the host's own
// addresses (every interface's, as the host saw them).
func NewLearnFilter(host []netip.Addr) *LearnFilter {
	f := &LearnFilter{}
	for _, a := range host {
		if a.IsValid() {
			f.host = append(f.host, a.Unmap().WithZone(""))
		}
	}
	slices.SortFunc(f.host, netip.Addr.Compare)
	f.host = slices.Compact(f.host)
	return f
}

// Host returns the host addresses the filter refuses.
func (f *LearnFilter) Host() []netip.Addr {
	if f == nil {
		return nil
	}
	return slices.Clone(f.host)
}

// Denied returns why a learned address must not be opened, or "" when it
// may be: a public unicast address that is not the host's.
func (f *LearnFilter) Denied(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid address"
	}
	a = a.WithZone("")
	if a.Is4() {
		return f.denied4(a)
	}
	// A mapped address (::ffff:a.b.c.d) is sent as IPv4 by the kernel: no
	// AAAA record has a reason to carry one.
	if nat64.Contains(a) {
		b := a.As16()
		v4 := netip.AddrFrom4([4]byte(b[12:]))
		if why := f.denied4(v4); why != "" {
			return "NAT64 of " + v4.String() + ": " + why
		}
		return f.deniedHost(a)
	}
	if why := lookup(Special6, a); why != "" {
		return why
	}
	if !globalUni6.Contains(a) {
		return "not global unicast (outside 2000::/3)"
	}
	return f.deniedHost(a)
}

func (f *LearnFilter) denied4(a netip.Addr) string {
	if slices.Contains(SlirpAddrs, a) {
		return "slirp4netns gateway or resolver"
	}
	if why := lookup(Special4, a); why != "" {
		return why
	}
	for _, d := range AlwaysDeny {
		if d.Contains(a) {
			return "cloud metadata"
		}
	}
	return f.deniedHost(a)
}

func (f *LearnFilter) deniedHost(a netip.Addr) string {
	if f != nil {
		if _, ok := slices.BinarySearchFunc(f.host, a, netip.Addr.Compare); ok {
			return "an address of the host"
		}
	}
	if slices.Contains(SlirpAddrs, a) {
		return "slirp4netns gateway or resolver"
	}
	return ""
}

func lookup(rs []SpecialRange, a netip.Addr) string {
	for _, r := range rs {
		if r.Prefix.Contains(a) {
			return r.Name
		}
	}
	return ""
}
