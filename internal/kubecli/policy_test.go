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
