package netpolicy

import (
	"net/netip"
	"slices"
)

// Names in the namespace's ruleset. lazaret-netd owns the whole namespace,
// so these are fixed.
const (
	TableName = "lazaret"
	ChainName = "output"

	SetAllow4 = "allow4" // merged allow_egress, IPv4 intervals
	SetAllow6 = "allow6"
	SetDeny4  = "deny4" // always-denied link-local and metadata, IPv4
	SetDeny6  = "deny6"
	SetHost4  = "host4" // the host's own addresses, always denied, IPv4
	SetHost6  = "host6"
	SetDNS4   = "dns4" // addresses of allowed names, per-element TTL
	SetDNS6   = "dns6"
)

// UpstreamMark is the SO_MARK of lazaret-netd's upstream DNS sockets. Only
// a process with CAP_NET_ADMIN in the namespace can set a mark, and only
// netd has it, so the mark tells netd's queries from the agent's.
const UpstreamMark uint32 = 0x4c5a4e44 // "LZND"

// DenyLogGroup is the nflog group every denied packet is copied to, so
// netd can count denials per destination.
const DenyLogGroup uint16 = 4653

// DenyLogSnaplen is how much of a denied packet is copied to netd: enough
// for the IPv6 header and the ports.
const DenyLogSnaplen uint32 = 64

// AlwaysDeny are the link-local and cloud metadata addresses that are
// refused even inside an allowed CIDR: the instance metadata services of
// AWS, GCP, Azure, OpenStack (169.254.169.254, fd00:ec2::254), Azure's
// wireserver, Alibaba's and Oracle's metadata addresses, and everything
// link-local (fe80::/10 unicast; link-local ND is allowed by its own rule).
var AlwaysDeny = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("168.63.129.16/32"),
	netip.MustParsePrefix("100.100.100.200/32"),
	netip.MustParsePrefix("192.0.0.192/32"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("64:ff9b::a9fe:0/112"), // 169.254.0.0/16 through NAT64
}

// Family restricts a rule or set to one address family.
type Family uint8

const (
	AnyFamily Family = iota
	IPv4
	IPv6
)

// Verdict ends a rule.
type Verdict string

const (
	Accept Verdict = "accept"
	Drop   Verdict = "drop"
	// Reject answers with ICMP administratively prohibited (a TCP RST for
	// TCP), so a denied connect fails at once instead of timing out:
	// `npm install` reports an error rather than hanging.
	Reject Verdict = "reject"
)

// Layer-4 protocol numbers used in rules.
const (
	ProtoTCP    uint8 = 6
	ProtoUDP    uint8 = 17
	ProtoICMPv6 uint8 = 58
)

// Set is one named set of the table.
type Set struct {
	Name   string
	Family Family
	// Interval sets hold prefixes; the others hold single addresses.
	Interval bool
	// Timeout sets take a per-element timeout (the DNS sets).
	Timeout bool
	// Elements are the prefixes the set is created with, merged and
	// sorted (see Ranges).
	Elements []netip.Prefix
}

// Rule is one rule of the output chain. Every non-zero field is a match;
// all must hold.
type Rule struct {
	Comment  string
	Family   Family
	OifLo    bool
	CtState  []string // "established", "related", "invalid"
	Mark     uint32
	L4       uint8
	Dport    uint16
	ICMPv6ND bool // ICMPv6 types 133–136 with hop limit 255 (neighbour discovery)
	DaddrSet string
	Counter  bool
	LogGroup uint16
	Verdict  Verdict
}

// Ruleset is the whole table.
type Ruleset struct {
	Table    string
	Chain    string
	Priority int
	Policy   Verdict
	Sets     []Set
	Rules    []Rule
}

// Build returns the ruleset of the active policy p. Order matters and is the
// security argument:
//
//  1. loopback (netd's resolver lives there) and established/related flows
//     are accepted first, so a policy update never cuts a running transfer;
//  2. neighbour discovery, without which IPv6 cannot reach a router;
//  3. netd's marked upstream DNS sockets;
//  4. deny: metadata/link-local sets, the host's own addresses (through
//     the uplink they are the host's services), then DNS to anything but
//     netd — before any allow, so no allowed CIDR re-opens them;
//  5. allow: configured CIDRs and the addresses of allowed names;
//  6. everything else is counted, logged to netd and rejected; the chain
//     policy drop catches what a rule could not (fail closed).
//
// host are the host's own addresses (HostSets).
func Build(p Policy, host []netip.Addr) Ruleset {
	var allow4, allow6, deny4, deny6 []netip.Prefix
	for _, c := range p.AllowEgress {
		pfx := unmapPrefix(c.Prefix)
		if pfx.Addr().Is4() {
			allow4 = append(allow4, pfx)
		} else {
			allow6 = append(allow6, pfx)
		}
	}
	for _, d := range AlwaysDeny {
		if d.Addr().Is4() {
			deny4 = append(deny4, d)
		} else {
			deny6 = append(deny6, d)
		}
	}
	host4, host6 := HostSets(host)
	denied := func(r Rule) Rule {
		r.Counter, r.LogGroup, r.Verdict = true, DenyLogGroup, Reject
		return r
	}
	return Ruleset{
		Table:    TableName,
		Chain:    ChainName,
		Priority: 0,
		Policy:   Drop,
		Sets: []Set{
			{Name: SetAllow4, Family: IPv4, Interval: true, Elements: MergePrefixes(allow4)},
			{Name: SetAllow6, Family: IPv6, Interval: true, Elements: MergePrefixes(allow6)},
			{Name: SetDeny4, Family: IPv4, Interval: true, Elements: MergePrefixes(deny4)},
			{Name: SetDeny6, Family: IPv6, Interval: true, Elements: MergePrefixes(deny6)},
			{Name: SetDNS4, Family: IPv4, Timeout: true},
			{Name: SetDNS6, Family: IPv6, Timeout: true},
			{Name: SetHost4, Family: IPv4, Interval: true, Elements: host4},
			{Name: SetHost6, Family: IPv6, Interval: true, Elements: host6},
		},
		Rules: []Rule{
			{Comment: "loopback", OifLo: true, Verdict: Accept},
			{Comment: "established", CtState: []string{"established", "related"}, Verdict: Accept},
			{Comment: "invalid", CtState: []string{"invalid"}, Counter: true, Verdict: Drop},
			{Comment: "ipv6 neighbour discovery", Family: IPv6, L4: ProtoICMPv6, ICMPv6ND: true, Verdict: Accept},
			{Comment: "netd upstream dns udp", Mark: UpstreamMark, L4: ProtoUDP, Dport: 53, Verdict: Accept},
			{Comment: "netd upstream dns tcp", Mark: UpstreamMark, L4: ProtoTCP, Dport: 53, Verdict: Accept},
			denied(Rule{Comment: "deny metadata ipv4", Family: IPv4, DaddrSet: SetDeny4}),
			denied(Rule{Comment: "deny metadata ipv6", Family: IPv6, DaddrSet: SetDeny6}),
			denied(Rule{Comment: "deny host ipv4", Family: IPv4, DaddrSet: SetHost4}),
			denied(Rule{Comment: "deny host ipv6", Family: IPv6, DaddrSet: SetHost6}),
			denied(Rule{Comment: "deny other dns udp", L4: ProtoUDP, Dport: 53}),
			denied(Rule{Comment: "deny other dns tcp", L4: ProtoTCP, Dport: 53}),
			{Comment: "allow egress ipv4", Family: IPv4, DaddrSet: SetAllow4, Verdict: Accept},
			{Comment: "allow egress ipv6", Family: IPv6, DaddrSet: SetAllow6, Verdict: Accept},
			{Comment: "allow resolved ipv4", Family: IPv4, DaddrSet: SetDNS4, Verdict: Accept},
			{Comment: "allow resolved ipv6", Family: IPv6, DaddrSet: SetDNS6, Verdict: Accept},
			denied(Rule{Comment: "deny default"}),
		},
	}
}

// AllowSets returns the contents of allow4 and allow6 for the active
// policy p (what a live update replaces).
func AllowSets(p Policy) (v4, v6 []netip.Prefix) {
	rs := Build(p, nil)
	return rs.Sets[0].Elements, rs.Sets[1].Elements
}

// HostSets returns the contents of host4 and host6: each of the host's
// addresses as a single-address prefix. The host's addresses are what a
// connection through the uplink (slirp4netns) to the host itself would
// use: refused even inside an allowed CIDR (0.0.0.0/0 included), as the
// metadata addresses are. Loopback is left out: in the sandbox's namespace
// it is the namespace's own (netd's resolver), accepted by the first rule.
func HostSets(host []netip.Addr) (v4, v6 []netip.Prefix) {
	for _, a := range host {
		a = a.Unmap()
		switch {
		case !a.IsValid() || a.IsLoopback() || a.IsUnspecified():
		case a.Is4():
			v4 = append(v4, netip.PrefixFrom(a.WithZone(""), 32))
		default:
			v6 = append(v6, netip.PrefixFrom(a.WithZone(""), 128))
		}
	}
	return MergePrefixes(v4), MergePrefixes(v6)
}

// Why NeverOpened refuses an address.
const (
	NeverHost     = "an address of this host"
	NeverMetadata = "link-local or cloud metadata"
)

// NeverOpened says why the ruleset refuses a, whatever the policy allows
// ("" when a policy can open it): one of the host's own addresses, or an
// always-denied (link-local, metadata) one. A denial notice offers no
// `lazaret net allow` for such an address, and netd refuses to allow it.
func NeverOpened(a netip.Addr, host []netip.Addr) string {
	a = a.Unmap().WithZone("")
	if !a.IsLoopback() {
		for _, h := range host {
			if h.Unmap().WithZone("") == a {
				return NeverHost
			}
		}
	}
	for _, d := range AlwaysDeny {
		if d.Contains(a) {
			return NeverMetadata
		}
	}
	return ""
}

// NeverOpenedPrefix says why allowing p would open nothing: it is one
// address NeverOpened refuses, or it lies wholly in AlwaysDeny. A wider
// prefix that merely holds such addresses opens the rest; they stay
// refused inside it.
func NeverOpenedPrefix(p netip.Prefix, host []netip.Addr) string {
	if p.IsSingleIP() {
		return NeverOpened(p.Addr(), host)
	}
	for _, d := range AlwaysDeny {
		if d.Bits() <= p.Bits() && d.Contains(p.Addr()) {
			return NeverMetadata
		}
	}
	return ""
}

// unmapPrefix turns an IPv4-mapped IPv6 prefix (::ffff:1.2.3.0/120) into
// its IPv4 prefix: the kernel sends such destinations as IPv4 packets,
// which an ip6 set would never match.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked()
	}
	return p
}

// MaxResolved bounds each of the dns4/dns6 sets.
const MaxResolved = 65536

// AddrRange is an inclusive range of addresses of one family.
type AddrRange struct{ First, Last netip.Addr }

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// MergePrefixes masks, sorts and merges overlapping or adjacent prefixes
// of one family into the fewest prefixes covering the same addresses:
// the kernel refuses overlapping intervals in one set.
func MergePrefixes(ps []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range MergeRanges(ps) {
		out = append(out, rangeToPrefixes(r.First, r.Last)...)
	}
	return out
}

// MergeRanges masks, sorts and merges ps into disjoint, non-adjacent
// ranges (the kernel's interval sets refuse overlaps).
func MergeRanges(ps []netip.Prefix) []AddrRange {
	rs := make([]AddrRange, 0, len(ps))
	for _, p := range ps {
		if !p.IsValid() {
			continue
		}
		p = p.Masked()
		rs = append(rs, AddrRange{p.Addr(), lastAddr(p)})
	}
	slices.SortFunc(rs, func(a, b AddrRange) int { return a.First.Compare(b.First) })
	var out []AddrRange
	for _, r := range rs {
		if n := len(out); n > 0 {
			prev := &out[n-1]
			next := prev.Last.Next()
			if r.First.Compare(prev.Last) <= 0 || (next.IsValid() && next == r.First) {
				if r.Last.Compare(prev.Last) > 0 {
					prev.Last = r.Last
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// rangeToPrefixes splits an inclusive range into aligned prefixes.
func rangeToPrefixes(first, last netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	bits := first.BitLen()
	for {
		// The largest prefix starting at first that stays within last.
		n := bits
		for n > 0 {
			p := netip.PrefixFrom(first, n-1)
			if p.Masked().Addr() != first || lastAddr(p).Compare(last) > 0 {
				break
			}
			n--
		}
		p := netip.PrefixFrom(first, n)
		out = append(out, p)
		end := lastAddr(p)
		if end == last {
			return out
		}
		first = end.Next()
	}
}
