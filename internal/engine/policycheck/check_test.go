package policycheck

import (
	"net/netip"
	"slices"
	"testing"
)

var testPolicy = Policy{
	Domains:     []string{"*.npmjs.org", "github.com"},
	CIDRs:       []netip.Prefix{netip.MustParsePrefix("140.82.112.0/20")},
	SecretHosts: []string{"api.openai.com"},
	AutoApprove: [][]string{{"/usr/bin/ls"}},
}

// Each finding has a candidate that raises it and, beside it, its
// positive control: the nearest candidate that does not (so the table
// proves the check, not only the input).
func TestCheckNetFindings(t *testing.T) {
	cases := []struct {
		code, hit, miss string
		sev             Severity
	}{
		{CodeTooBroad, "*", "*.example.com", Refuse},
		{CodeTooBroad, "*.co.uk", "*.example.co.uk", Refuse},
		{CodeTooBroad, "*.github.io", "*.pages.example.org", Refuse},
		{CodeTooBroad, "93.0.0.0/12", "93.184.0.0/16", Refuse},
		{CodeTooBroad, "2001:db8::/31", "2a00:1450::/32", Refuse},
		{CodeSpecialRange, "10.1.2.3", "93.184.216.34", Refuse},
		{CodeSpecialRange, "169.254.169.254", "151.101.1.69", Refuse},
		{CodeSpecialRange, "[::1]:22", "[2a00:1450:4001::1]:443", Refuse},
		{CodeSpecialRange, "100.64.0.1", "100.128.0.1", Refuse},
		{CodeWildcard, "*.example.com", "www.example.com", Review},
		{CodeSecretHost, "api.openai.com", "api.example.com", Review},
		{CodeSecretHost, "cdn.openai.com", "cdn.example.com", Review},
		{CodeSecretHost, "*.openai.com", "*.example.net", Review},
		{CodeUserContent, "raw.githubusercontent.com", "api.github.com", Review},
		{CodeUserContent, "evil.ngrok.io", "ngrok.example.com", Review},
		{CodeUserContent, "webhook.site", "website.example", Review},
		{CodeLookAlike, "аpple.com", "apple.com", Review},
		{CodeLookAlike, "xn--80ak6aa92e.com", "xn--mnchen-3ya.de", Review}, // "аррӏе" vs "münchen"
		{CodeMixedScripts, "раypal.com", "пример.рф", Review},
		{CodeIPLiteral, "93.184.216.34", "example.org", Review},
		{CodePorts, "example.org:8443", "example.org", Info},
		{CodeAlready, "registry.npmjs.org", "registry.yarnpkg.com", Info},
		{CodeAlready, "140.82.113.4", "140.82.128.4", Info},
	}
	for _, c := range cases {
		hit := mustNet(t, c.hit)
		f, ok := find(hit, c.code)
		if !ok {
			t.Errorf("%s: no %s finding: %+v", c.hit, c.code, hit.Findings)
			continue
		}
		if f.Severity != c.sev {
			t.Errorf("%s: %s is %v, want %v", c.hit, c.code, f.Severity, c.sev)
		}
		if _, ok := find(mustNet(t, c.miss), c.code); ok {
			t.Errorf("control %s raised %s", c.miss, c.code)
		}
	}
}

func TestCleanAndRefused(t *testing.T) {
	if r := mustNet(t, "pypi.org"); !r.Clean() || r.Refused() {
		t.Errorf("pypi.org: %+v", r.Findings)
	}
	if r := mustNet(t, "registry.npmjs.org"); !r.Clean() {
		t.Errorf("an already allowed name is not clean: %+v", r.Findings)
	}
	if r := mustNet(t, "*.example.com"); r.Clean() || r.Refused() {
		t.Errorf("a wildcard: %+v", r.Findings)
	}
	if r := mustNet(t, "10.0.0.0/8"); !r.Refused() {
		t.Errorf("a private network is not refused: %+v", r.Findings)
	}
}

func TestCheckNetErrors(t *testing.T) {
	for _, bad := range []string{"", "a..b", "exa mple.com", "host:0", "host:65536", "host:+80", "host:080", "[::1", "[::1]x", "x--.com\x00", string(make([]byte, MaxCandidate+1))} {
		if r, err := CheckNet(testPolicy, bad); err == nil {
			t.Errorf("%q accepted: %+v", bad, r)
		}
	}
}

func TestCheckExec(t *testing.T) {
	cases := []struct {
		entry string
		code  string // "" = no finding
		sev   Severity
	}{
		{"bash -c id", CodeExecRefused, Refuse},
		{"git status", CodeExecRefused, Refuse},
		{"ls; rm -rf /", CodeExecRefused, Refuse},
		{"make test", CodeAgentFiles, Review},
		{"npm run build", CodeAgentFiles, Review},
		{"/usr/bin/ls", CodeAlready, Info},
		{"/usr/bin/du -sh {args}", "", 0}, // the control: a plain program
	}
	for _, c := range cases {
		r, err := CheckExec(testPolicy, c.entry)
		if err != nil {
			t.Fatalf("%s: %v", c.entry, err)
		}
		if c.code == "" {
			if len(r.Findings) != 0 {
				t.Errorf("%s: %+v", c.entry, r.Findings)
			}
			continue
		}
		if f, ok := find(r, c.code); !ok || f.Severity != c.sev {
			t.Errorf("%s: want %s/%v, got %+v", c.entry, c.code, c.sev, r.Findings)
		}
	}
}

// The same input gives the same findings, in the same order.
func TestDeterministic(t *testing.T) {
	a, b := mustNet(t, "gist.github.com:443"), mustNet(t, "gist.github.com:443")
	if !slices.Equal(a.Findings, b.Findings) || a.Version != Version {
		t.Fatalf("%+v vs %+v", a, b)
	}
}

func mustNet(t *testing.T, s string) Result {
	t.Helper()
	r, err := CheckNet(testPolicy, s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return r
}

func find(r Result, code string) (Finding, bool) {
	for _, f := range r.Findings {
		if f.Code == code {
			return f, true
		}
	}
	return Finding{}, false
}
