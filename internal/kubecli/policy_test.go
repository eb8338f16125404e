package kubecli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyDiffVerb: lazaret --backend kubernetes policy diff is the
// local CLI's verb (clicore.NewPolicyCmd): what a change opens, each
// opening checked, --exit-code 1 when it opens anything; the control, a
// file compared with itself, exits 0 with "no policy change".
func TestPolicyDiffVerb(t *testing.T) {
	e := newEnv(t, "")
	dir := t.TempDir()
	oldF, newF := filepath.Join(dir, "old.toml"), filepath.Join(dir, "new.toml")
	_ = os.WriteFile(oldF, []byte("[network]\nallow_domains = [\"pypi.org\"]\n"), 0o600)
	_ = os.WriteFile(newF, []byte("[network]\nallow_domains = [\"pypi.org\", \"*.github.io\"]\n"), 0o600)
	if code := e.run("policy", "diff", "--exit-code", oldF, newF); code != 1 ||
		!strings.Contains(e.out.String(), "+ profiles.default.allow_domains *.github.io") || !strings.Contains(e.out.String(), "refuse too-broad:") {
		t.Fatalf("exit %d\n%s%s", code, e.out.String(), e.errOut.String())
	}
	if code := e.run("policy", "diff", "--exit-code", newF, newF); code != 0 || !strings.Contains(e.out.String(), "no policy change") {
		t.Fatalf("self: exit %d\n%s%s", code, e.out.String(), e.errOut.String())
	}
}

// TestNetCheckVerb: with no cluster sandbox, `net check` answers from the
// configuration, as the local CLI does: a name allowed (with what the
// NetworkPolicy still limits on Kubernetes), an address in allow_egress
// allowed, metadata denied, a name outside denied (exit 1), a pattern a
// usage error.
func TestNetCheckVerb(t *testing.T) {
	e := newEnv(t, "[network]\nallow_domains = [\"*.npmjs.org\"]\nallow_egress = [\"140.82.112.0/20\"]\n")
	for _, c := range []struct {
		target string
		code   int
		want   string
	}{
		{"registry.npmjs.org:443", 0, "allowed: registry.npmjs.org by *.npmjs.org (the configuration"},
		{"140.82.113.1", 0, "allowed: 140.82.113.1 by 140.82.112.0/20"},
		{"169.254.169.254", 1, "always denied"},
		{"example.org", 1, "denied: example.org"},
	} {
		code := e.run("net", "check", c.target)
		if code != c.code || !strings.Contains(e.out.String(), c.want) {
			t.Errorf("net check %s: exit %d\n%s%s", c.target, code, e.out.String(), e.errOut.String())
		}
	}
	e.run("net", "check", "registry.npmjs.org")
	if !strings.Contains(e.out.String(), "NetworkPolicy") {
		t.Errorf("an allowed name does not say what the NetworkPolicy still limits:\n%s", e.out.String())
	}
	if code := e.run("net", "check", "*.npmjs.org"); code != 2 {
		t.Errorf("a pattern: exit %d %s", code, e.errOut.String())
	}
}
