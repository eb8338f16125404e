package netpolicy

import (
	"net/netip"
	"testing"
)

// firstMidLast are three addresses of p: its first, one in the middle
// and its last.
func firstMidLast(p netip.Prefix) []netip.Addr {
	first, last := p.Masked().Addr(), lastAddr(p)
	b := first.AsSlice()
	if bit := p.Bits(); bit < len(b)*8 {
		b[bit/8] |= 0x80 >> (bit % 8) // the upper half's first address
	}
	mid, _ := netip.AddrFromSlice(b)
	return []netip.Addr{first, mid, last}
}

// embed6to4 is 2002:V4ADDR::1, the 6to4 address of v4.
func embed6to4(v4 netip.Addr) netip.Addr {
	b4 := v4.As4()
	return netip.AddrFrom16([16]byte{0x20, 0x02, b4[0], b4[1], b4[2], b4[3], 15: 1})
}

// embedNAT64 is 64:ff9b::V4ADDR.
func embedNAT64(v4 netip.Addr) netip.Addr {
	b4 := v4.As4()
	return netip.AddrFrom16([16]byte{0, 0x64, 0xff, 0x9b, 12: b4[0], 13: b4[1], 14: b4[2], 15: b4[3]})
}

// TestLearnFilterSpecialRanges: the first, a middle and the last address of
// every special-purpose range are refused, and so are their IPv4-mapped,
// 6to4 and NAT64 forms. Positive control: public addresses next to them
// (and NAT64 of a public address) pass the same filter.
func TestLearnFilterSpecialRanges(t *testing.T) {
	f := NewLearnFilter(nil)
	for _, r := range Special4 {
		for _, a := range firstMidLast(r.Prefix) {
			forms := []netip.Addr{a, netip.AddrFrom16(a.As16()), embed6to4(a), embedNAT64(a)}
			for _, x := range forms {
				if f.Denied(x) == "" {
					t.Errorf("%s (%s, from %s) allowed", x, r.Name, a)
				}
			}
		}
	}
	for _, r := range Special6 {
		for _, a := range firstMidLast(r.Prefix) {
			if r.Prefix == nat64 {
				continue // decided by the embedded IPv4 address, below
			}
			if f.Denied(a) == "" {
				t.Errorf("%s (%s) allowed", a, r.Name)
			}
			if z := a.WithZone("eth0"); f.Denied(z) == "" {
				t.Errorf("%s allowed", z)
			}
		}
	}
	for _, s := range []string{"::2", "::1.2.3.4", "4000::1", "8000::1", "e000::1", "1fff:ffff::1"} {
		if f.Denied(netip.MustParseAddr(s)) == "" {
			t.Errorf("%s (outside 2000::/3) allowed", s)
		}
	}
	for _, s := range []string{"168.63.129.16", "100.100.100.200", "10.0.2.2", "10.0.2.3", "fd00::2", "fd00::3", "fd00:ec2::254"} {
		if f.Denied(netip.MustParseAddr(s)) == "" {
			t.Errorf("%s (metadata or slirp) allowed", s)
		}
	}
	// Positive control: the neighbours of the ranges are public and pass.
	for _, s := range []string{"1.1.1.1", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255",
		"128.0.0.0", "169.253.255.255", "172.15.255.255", "172.32.0.0", "192.0.1.255", "192.0.3.0", "192.167.255.255",
		"192.169.0.0", "198.17.255.255", "198.20.0.0", "223.255.255.255", "140.82.112.3",
		"2000::1", "2001:200::1", "2001:db7:ffff::1", "2606:4700::1", "2a00:1450::1", "3ffe::1", "3fff:1000::1",
		"64:ff9b::8c52:7003"} {
		if why := f.Denied(netip.MustParseAddr(s)); why != "" {
			t.Errorf("public %s refused: %s", s, why)
		}
	}
}

// TestLearnFilterHostAddresses: the host's own addresses are refused,
// also through NAT64. Positive control: the same addresses pass a filter
// that was not told about the host.
func TestLearnFilterHostAddresses(t *testing.T) {
	host := []netip.Addr{netip.MustParseAddr("140.82.112.3"), netip.MustParseAddr("2a00:1450::1%eth0"), netip.MustParseAddr("::ffff:8.8.4.4")}
	f := NewLearnFilter(host)
	none := NewLearnFilter(nil)
	for _, s := range []string{"140.82.112.3", "2a00:1450::1", "8.8.4.4", "64:ff9b::8c52:7003"} {
		a := netip.MustParseAddr(s)
		if f.Denied(a) == "" {
			t.Errorf("host address %s allowed", s)
		}
		if why := none.Denied(a); why != "" {
			t.Errorf("control: %s refused without host addresses: %s", s, why)
		}
	}
	if why := f.Denied(netip.MustParseAddr("140.82.112.4")); why != "" {
		t.Errorf("neighbour of the host refused: %s", why)
	}
	if len(f.Host()) != 3 {
		t.Errorf("Host() = %v", f.Host())
	}
	var nilF *LearnFilter
	if nilF.Denied(netip.MustParseAddr("127.0.0.1")) == "" || nilF.Denied(netip.MustParseAddr("1.1.1.1")) != "" {
		t.Error("nil filter")
	}
}

// FuzzLearnFilter: whatever 16 bytes an AAAA (or 4 an A) record carries,
// an address the filter lets through is global unicast, not the host's,
// and its IPv4 form (mapped or NAT64) is not special.
func FuzzLearnFilter(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1", "2606:4700::1", "fd00:ec2::254", "192.0.3.7"} {
		f.Add(netip.MustParseAddr(s).AsSlice())
	}
	host := netip.MustParseAddr("192.0.3.7")
	lf := NewLearnFilter([]netip.Addr{host})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		if lf.Denied(a) != "" {
			return
		}
		if a == host || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() || a.Is4In6() {
			t.Fatalf("%s allowed", a)
		}
		v4 := a
		if nat64.Contains(a) {
			v4 = netip.AddrFrom4([4]byte(a.AsSlice()[12:]))
		}
		if v4.Is4() && (lookup(Special4, v4) != "" || v4 == host) {
			t.Fatalf("%s (IPv4 %s) allowed", a, v4)
		}
		if a.Is6() && !nat64.Contains(a) && (lookup(Special6, a) != "" || !globalUni6.Contains(a)) {
			t.Fatalf("special %s allowed", a)
		}
	})
}
