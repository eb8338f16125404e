package policycheck

import (
	"net/netip"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

func TestDecide(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	pol, err := netpolicy.FromConfig([]netip.Prefix{netip.MustParsePrefix("140.82.112.0/20"), netip.MustParsePrefix("169.254.0.0/16")},
		[]string{"*.npmjs.org", "pypi.org"})
	if err != nil {
		t.Fatal(err)
	}
	pol.AllowDomains = append(pol.AllowDomains, netpolicy.Domain{Pattern: "old.example.com", Expires: now.Add(-time.Second)})
	cases := []struct {
		target string
		allow  bool
		rule   string
	}{
		{"registry.npmjs.org", true, "*.npmjs.org"},
		{"npmjs.org", false, ""}, // a wildcard does not cover its own suffix
		{"PyPI.org.:443", true, "pypi.org"},
		{"files.pythonhosted.org", false, ""},
		{"old.example.com", false, ""}, // expired
		{"140.82.113.4", true, "140.82.112.0/20"},
		{"140.82.128.4", false, ""},
		{"169.254.169.254", false, ""}, // always denied, even inside an allowed network
		{"169.254.1.1", false, ""},
		{"140.82.127.255", true, "140.82.112.0/20"},
		{"[2606:4700::1]:443", false, ""},
	}
	for _, c := range cases {
		d, err := Decide(pol, c.target, now)
		if err != nil {
			t.Fatalf("%s: %v", c.target, err)
		}
		if d.Allowed != c.allow || d.Rule != c.rule || d.Why == "" {
			t.Errorf("%s: %+v, want allowed=%v rule=%q", c.target, d, c.allow, c.rule)
		}
	}
	for _, bad := range []string{"*.npmjs.org", "10.0.0.0/8", "a..b", ""} {
		if d, err := Decide(pol, bad, now); err == nil {
			t.Errorf("%q accepted: %+v", bad, d)
		}
	}
}
