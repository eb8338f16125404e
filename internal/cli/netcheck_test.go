package cli

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi/netdtest"
)

// TestNetCheckConfigured: with nothing running, `net check` answers
// from the configuration: exit 0 allowed (naming the rule), 1 denied,
// 2 for a target that is no host.
func TestNetCheckConfigured(t *testing.T) {
	e := netEnv(t, "[profiles.claude]\nimage = \"x:1\"\nallow_egress = [\"140.82.112.0/20\"]\nallow_domains = [\"*.anthropic.com\"]\n")
	for _, c := range []struct {
		target string
		code   int
		want   string
	}{
		{"api.anthropic.com:443", 0, "allowed: api.anthropic.com by *.anthropic.com (the configuration (no sandbox runs)"},
		{"anthropic.com", 1, "denied: anthropic.com"},
		{"140.82.113.1", 0, "allowed: 140.82.113.1 by 140.82.112.0/20"},
		{"169.254.169.254", 1, "always denied"},
	} {
		out, errOut, code := e.run("net", "check", "claude", c.target)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("net check %s: exit %d\n%s%s", c.target, code, out, errOut)
		}
	}
	if _, errOut, code := e.run("net", "check", "claude", "*.anthropic.com"); code != exitUsage || !strings.Contains(errOut, "not a host name") {
		t.Errorf("a pattern: exit %d %s", code, errOut)
	}
}

// TestNetCheckLive: a running sandbox's live policy decides (an entry
// `net allow` added is allowed although the configuration lacks it).
func TestNetCheckLive(t *testing.T) {
	e := netEnv(t, "")
	srv, _ := netdtest.Serve(t, e.netdSocket("default"))
	srv.SetPolicy(netpolicy.Policy{AllowDomains: []netpolicy.Domain{{Pattern: "pypi.org"}},
		AllowEgress: []netpolicy.CIDR{{Prefix: netip.MustParsePrefix("192.0.3.0/24")}}})
	out, errOut, code := e.run("net", "check", "pypi.org")
	if code != 0 || !strings.Contains(out, "the running sandbox's policy") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// Control: a name the live policy lacks is denied.
	if _, _, code := e.run("net", "check", "example.org"); code != 1 {
		t.Fatalf("example.org: exit %d", code)
	}
}

// TestPolicyDiff: the CLI prints each opening with its findings and
// --exit-code turns "opens something" into exit 1; a file compared with
// itself prints "no policy change" and exits 0.
func TestPolicyDiff(t *testing.T) {
	e := netEnv(t, "")
	dir := t.TempDir()
	oldF, newF := filepath.Join(dir, "old.toml"), filepath.Join(dir, "new.toml")
	_ = os.WriteFile(oldF, []byte("[network]\nallow_domains = [\"pypi.org\"]\n"), 0o600)
	_ = os.WriteFile(newF, []byte("[network]\nallow_domains = [\"pypi.org\", \"*.example.com\"]\nallow_egress = [\"10.0.0.0/8\"]\n"), 0o600)
	out, errOut, code := e.run("policy", "diff", "--exit-code", oldF, newF)
	for _, want := range []string{"+ profiles.default.allow_domains *.example.com", "review wildcard:", "+ profiles.default.allow_egress 10.0.0.0/8", "refuse special-range:"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q: exit %d\n%s%s", want, code, out, errOut)
		}
	}
	if code != 1 {
		t.Errorf("--exit-code: exit %d", code)
	}
	out, _, code = e.run("policy", "diff", "--exit-code", newF, newF)
	if code != 0 || !strings.Contains(out, "no policy change") {
		t.Errorf("self: exit %d %s", code, out)
	}
	out, _, code = e.run("policy", "diff", "--json", oldF, newF)
	if code != 0 || !strings.Contains(out, `"checker_version": 1`) || !strings.Contains(out, `"severity": "refuse"`) {
		t.Errorf("json: exit %d %s", code, out)
	}
	if _, errOut, code := e.run("policy", "diff", oldF, filepath.Join(dir, "missing.toml")); code == 0 || !strings.Contains(errOut, "missing.toml") {
		t.Errorf("missing file: exit %d %s", code, errOut)
	}
}
