package netpolicy

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the rule model (run with -update to accept):\n%s", path, got)
	}
}

func TestBuildGolden(t *testing.T) {
	p, err := FromConfig([]netip.Prefix{
		netip.MustParsePrefix("140.82.112.0/20"),
		netip.MustParsePrefix("160.79.104.0/23"),
		netip.MustParsePrefix("160.79.105.0/24"), // inside the /23: merged
		netip.MustParsePrefix("2606:4700::/32"),
	}, []string{"registry.npmjs.org", "*.anthropic.com"})
	if err != nil {
		t.Fatal(err)
	}
	host := []netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("fd00::2"), netip.MustParseAddr("::1")}
	golden(t, "ruleset.golden", Build(p.Active(time.Now()), host).Render())
	golden(t, "empty.golden", Build(Policy{}, nil).Render())
}

func TestDenyBeforeAllow(t *testing.T) {
	rs := Build(Policy{}, nil)
	idx := func(c string) int {
		return slices.IndexFunc(rs.Rules, func(r Rule) bool { return r.Comment == c })
	}
	for _, deny := range []string{"deny metadata ipv4", "deny metadata ipv6", "deny host ipv4", "deny host ipv6", "deny other dns udp", "deny other dns tcp"} {
		for _, allow := range []string{"allow egress ipv4", "allow egress ipv6", "allow resolved ipv4", "allow resolved ipv6"} {
			if idx(deny) < 0 || idx(allow) < 0 || idx(deny) > idx(allow) {
				t.Errorf("%q must come before %q", deny, allow)
			}
		}
	}
	if rs.Policy != Drop {
		t.Errorf("chain policy %s, want drop", rs.Policy)
	}
	last := rs.Rules[len(rs.Rules)-1]
	if last.Verdict == Accept || last.Family != AnyFamily || last.DaddrSet != "" {
		t.Errorf("last rule must deny everything: %+v", last)
	}
}

func TestMergePrefixes(t *testing.T) {
	pp := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	for _, tc := range []struct{ in, want []netip.Prefix }{
		{pp("10.0.0.0/8", "10.1.0.0/16"), pp("10.0.0.0/8")},
		{pp("10.0.0.0/25", "10.0.0.128/25"), pp("10.0.0.0/24")},
		{pp("10.0.0.5/24"), pp("10.0.0.0/24")},
		{pp("10.0.0.1/32", "10.0.0.2/32"), pp("10.0.0.1/32", "10.0.0.2/32")},
		{pp("0.0.0.0/0", "1.2.3.4/32"), pp("0.0.0.0/0")},
		{pp("::/0"), pp("::/0")},
		{pp("2001:db8::/33", "2001:db8:8000::/33"), pp("2001:db8::/32")},
		{nil, nil},
	} {
		if got := MergePrefixes(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("MergePrefixes(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestAllowsName(t *testing.T) {
	p, err := FromConfig(nil, []string{"Registry.NPMjs.org.", "*.anthropic.com"})
	if err != nil {
		t.Fatal(err)
	}
	p = p.Active(time.Now())
	for name, want := range map[string]bool{
		"registry.npmjs.org":     true,
		"registry.npmjs.org.":    true,
		"REGISTRY.npmjs.org":     true,
		"x.registry.npmjs.org":   false,
		"npmjs.org":              false,
		"api.anthropic.com":      true,
		"a.b.anthropic.com.":     true,
		"anthropic.com":          false,
		"evilanthropic.com":      false,
		"anthropic.com.evil.org": false,
		"":                       false,
	} {
		if got := p.AllowsName(name); got != want {
			t.Errorf("AllowsName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestNormalizePatternRejects(t *testing.T) {
	for _, bad := range []string{"", "*", "*.com", "a..b", "exa mple.com", "*.*.example.com", "ex*ample.com", "a/b.com", "-"[:0]} {
		if _, err := NormalizePattern(bad); err == nil {
			t.Errorf("NormalizePattern(%q) accepted", bad)
		}
	}
}

func TestActiveExpiryAndDedup(t *testing.T) {
	now := time.Now()
	p := Policy{
		AllowEgress: []CIDR{
			{Prefix: netip.MustParsePrefix("10.0.0.1/24"), Expires: now.Add(time.Minute)},
			{Prefix: netip.MustParsePrefix("10.0.0.0/24")},
			{Prefix: netip.MustParsePrefix("10.9.0.0/16"), Expires: now.Add(-time.Second)},
		},
		AllowDomains: []Domain{{Pattern: "a.example", Expires: now.Add(-time.Second)}, {Pattern: "b.example", Expires: now.Add(time.Hour)}},
	}
	a := p.Active(now)
	if len(a.AllowEgress) != 1 || a.AllowEgress[0].Prefix.String() != "10.0.0.0/24" || !a.AllowEgress[0].Expires.IsZero() {
		t.Errorf("active egress %+v", a.AllowEgress)
	}
	if len(a.AllowDomains) != 1 || a.AllowDomains[0].Pattern != "b.example" {
		t.Errorf("active domains %+v", a.AllowDomains)
	}
	if got := p.NextExpiry(); !got.Equal(now.Add(-time.Second)) {
		t.Errorf("NextExpiry %v", got)
	}
}

func TestParseTarget(t *testing.T) {
	for in, want := range map[string]string{"10.1.2.3/8": "10.0.0.0/8", "10.1.2.3": "10.1.2.3/32", "2001:db8::1": "2001:db8::1/128"} {
		p, d, err := ParseTarget(in)
		if err != nil || d != "" || p.String() != want {
			t.Errorf("ParseTarget(%q) = %v %q %v", in, p, d, err)
		}
	}
	if _, d, err := ParseTarget("*.Example.org"); err != nil || d != "*.example.org" {
		t.Errorf("domain: %q %v", d, err)
	}
	if _, _, err := ParseTarget("not a thing"); err == nil {
		t.Error("accepted garbage")
	}
}

func TestParsePacketDest(t *testing.T) {
	v4 := make([]byte, 24)
	v4[0], v4[9] = 0x45, ProtoTCP
	copy(v4[16:20], []byte{192, 0, 2, 9})
	v4[22], v4[23] = 0x01, 0xbb
	if d, ok := ParsePacketDest(v4); !ok || d.String() != "tcp 192.0.2.9:443" {
		t.Errorf("v4: %v %v", d, ok)
	}
	for _, bad := range [][]byte{nil, {0x45}, {0x60, 0, 0}, {0x4f, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}} {
		if _, ok := ParsePacketDest(bad); ok {
			t.Errorf("accepted %x", bad)
		}
	}
}

func FuzzParsePacketDest(f *testing.F) {
	f.Add([]byte{0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 192, 0, 2, 9, 0x30, 0x39, 0, 53})
	f.Add(append([]byte{0x60, 0, 0, 0, 0, 8, 6, 64}, make([]byte, 40)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, ok := ParsePacketDest(b)
		if ok && !d.Addr.IsValid() {
			t.Fatal("ok without an address")
		}
	})
}

func TestMappedPrefixGoesToIPv4(t *testing.T) {
	v4, v6 := AllowSets(Policy{AllowEgress: []CIDR{{Prefix: netip.MustParsePrefix("::ffff:10.1.2.0/120")}}})
	if len(v6) != 0 || len(v4) != 1 || v4[0].String() != "10.1.2.0/24" {
		t.Errorf("v4 %v v6 %v", v4, v6)
	}
}

// TestHostSetsAndNeverOpened: the host's own addresses go into the host
// sets (loopback left to the namespace's own loopback rule), and are what
// NeverOpened names, with the always-denied ranges; anything else a policy
// can open.
func TestHostSetsAndNeverOpened(t *testing.T) {
	host := []netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::ffff:10.0.0.5"), netip.MustParseAddr("fd00::2"), netip.MustParseAddr("::1")}
	v4, v6 := HostSets(host)
	if fmt.Sprint(v4) != "[10.0.0.5/32 192.0.2.2/32]" || fmt.Sprint(v6) != "[fd00::2/128]" {
		t.Errorf("host sets %v %v", v4, v6)
	}
	for a, want := range map[string]string{
		"192.0.2.2":        "an address of this host",
		"::ffff:192.0.2.2": "an address of this host",
		"10.0.0.5":         "an address of this host",
		"fd00::2":          "an address of this host",
		"169.254.169.254":  "link-local or cloud metadata",
		"fe80::1":          "link-local or cloud metadata",
		"127.0.0.1":        "",
		"192.0.2.3":        "",
		"140.82.112.4":     "",
	} {
		if got := NeverOpened(netip.MustParseAddr(a), host); got != want {
			t.Errorf("NeverOpened(%s) = %q, want %q", a, got, want)
		}
	}
}
