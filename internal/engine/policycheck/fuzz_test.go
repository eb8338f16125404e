package policycheck

import (
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCheckNet: any text the agent proposes gives a result or an error,
// never a panic; a result's rule is in normal form (a name pattern or a
// CIDR netpolicy accepts) and anything reaching a special range is
// refused.
func FuzzCheckNet(f *testing.F) {
	for _, s := range []string{"*", "*.co.uk", "example.com:443", "аpple.com", "xn--80ak6aa92e.com", "10.0.0.0/8",
		"[::1]:22", "169.254.169.254", "::ffff:10.0.0.1", "64:ff9b::a00:1", "8.8.8.8/32", "*.xn--p1ai", strings.Repeat("a.", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := CheckNet(testPolicy, s)
		if err != nil {
			return
		}
		if r.Version != Version || r.Kind != "net" || r.Rule == "" {
			t.Fatalf("%q: %+v", s, r)
		}
		if p, err := netip.ParsePrefix(r.Rule); err == nil {
			if specialOverlap(p) != "" && !r.Refused() {
				t.Fatalf("%q reaches a special range and is not refused: %+v", s, r)
			}
		} else if r.Rule != "*" && !utf8.ValidString(r.Rule) {
			t.Fatalf("%q: rule %q is not text", s, r.Rule)
		}
		for _, fd := range r.Findings {
			if !utf8.ValidString(fd.Message) {
				t.Fatalf("%q: finding not text: %q", s, fd.Message)
			}
		}
	})
}

// FuzzCheckCIDR: any prefix is refused when it reaches a special range
// or is broader than the bound, whatever its spelling.
func FuzzCheckCIDR(f *testing.F) {
	f.Add([]byte{10, 0, 0, 0}, 8)
	f.Add([]byte{93, 184, 216, 34}, 32)
	f.Add(make([]byte, 16), 0)
	f.Fuzz(func(t *testing.T, addr []byte, bits int) {
		a, ok := netip.AddrFromSlice(addr)
		if !ok || bits < 0 || bits > a.BitLen() {
			return
		}
		p := netip.PrefixFrom(a, bits).Masked()
		r, err := CheckNet(testPolicy, p.String())
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if (specialOverlap(p) != "" || broad(p)) && !r.Refused() {
			t.Fatalf("%s not refused: %+v", p, r)
		}
	})
}

// FuzzCheckExec: no proposed command line panics the checker.
func FuzzCheckExec(f *testing.F) {
	for _, s := range []string{"make test", "bash -c id", "/usr/bin/ls {args}", "a\x00b", "x $(y)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = CheckExec(testPolicy, s)
	})
}
