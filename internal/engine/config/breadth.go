package config

import (
	"fmt"
	"net/netip"
)

// The breadth bound: an allowed CIDR shorter than /BroadBits4 (IPv4) or
// /BroadBits6 (IPv6) opens a large share of the Internet (10.0.0.0/1 is
// half of it). `lazaret config check` warns about such an entry and
// `lazaret net allow` refuses one without --yes (docs/NETWORK.md).
const (
	BroadBits4 = 8
	BroadBits6 = 16
)

// Broad reports whether p is shorter than the breadth bound of its family.
func Broad(p netip.Prefix) bool {
	if p.Addr().Is4() {
		return p.Bits() < BroadBits4
	}
	return p.Bits() < BroadBits6
}

// BroadBound is the bound of p's family, as "/8" or "/16".
func BroadBound(p netip.Prefix) string {
	if p.Addr().Is4() {
		return fmt.Sprintf("/%d", BroadBits4)
	}
	return fmt.Sprintf("/%d", BroadBits6)
}

// Breadth says how much of its family p opens: "every IPv4 destination"
// for a /0, else "1/2 of the IPv4 addresses" or "2^24 IPv4 addresses".
func Breadth(p netip.Prefix) string {
	fam := "IPv6"
	if p.Addr().Is4() {
		fam = "IPv4"
	}
	host := p.Addr().BitLen() - p.Bits()
	switch {
	case p.Bits() == 0:
		return "every " + fam + " destination"
	case p.Bits() <= 8:
		return fmt.Sprintf("1/%d of all %s addresses", 1<<p.Bits(), fam)
	case host == 0:
		return "one " + fam + " address"
	case host < 20:
		return fmt.Sprintf("%d %s addresses", 1<<host, fam)
	}
	return fmt.Sprintf("2^%d %s addresses", host, fam)
}

// HostBitsSet reports whether s, a CIDR as a user wrote it, has host bits
// set, so that the network it really opens, p (s masked), is not what it
// says: 8.8.8.8/0 is 0.0.0.0/0. A bare address is its own /32 or /128.
func HostBitsSet(s string, p netip.Prefix) bool {
	q, err := netip.ParsePrefix(s)
	return err == nil && q != p
}
