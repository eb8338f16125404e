package clicore

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

const savedDoc = `# my lazaret settings
[profiles.dev]
image = "x:1"   # pinned
# names the agent needs
allow_domains = ["pypi.org"]  # keep this comment

[escalation]
# nothing auto-approved yet
`

// TestSaveRuleRoundTrip: --save adds exactly the approved rule, keeps
// every comment and the file's mode, prints the changed lines (- and +)
// first, and the file still parses with the rule in it.
func TestSaveRuleRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(savedDoc), 0o640); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := SaveRule(&out, path, "dev", ctl.Proposal{Key: config.KeyAllowDomains, Rule: "example.org"}); err != nil {
		t.Fatal(err)
	}
	if err := SaveRule(&out, path, "dev", ctl.Proposal{Key: config.KeyAutoApprove, Rule: "go vet ./..."}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, c := range []string{"# my lazaret settings", "# pinned", "# names the agent needs", "# keep this comment", "# nothing auto-approved yet"} {
		if !strings.Contains(string(data), c) {
			t.Errorf("comment %q lost:\n%s", c, data)
		}
	}
	cfg, err := config.Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	if d := cfg.Profiles["dev"].AllowDomains; len(d) != 2 || d[1] != "example.org" {
		t.Errorf("allow_domains = %q", d)
	}
	if a := cfg.Escalation.AutoApprove; len(a) != 1 || strings.Join(a[0], " ") != "go vet ./..." {
		t.Errorf("auto_approve = %q", a)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	o := out.String()
	if !strings.Contains(o, `-allow_domains = ["pypi.org"]  # keep this comment`) || !strings.Contains(o, `+allow_domains = ["pypi.org", "example.org"]`) ||
		!strings.Contains(o, `+auto_approve = ["go vet ./..."]`) {
		t.Errorf("diff:\n%s", o)
	}
	if strings.Index(o, "+allow_domains") > strings.Index(o, "saved to") {
		t.Error("the diff came after the write")
	}
}

// TestSaveRuleRefused: a file AddRule cannot edit is left as it is, and
// the error is one line saying what to add by hand.
func TestSaveRuleRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	doc := "[profiles.dev]\nimage = \"x:1\"\nallow_domains = \"\"\"\npypi.org\"\"\"\n"
	_ = os.WriteFile(path, []byte(doc), 0o600)
	err := SaveRule(&bytes.Buffer{}, path, "dev", ctl.Proposal{Key: config.KeyAllowDomains, Rule: "example.org"})
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), `add "example.org" to allow_domains in [profiles.dev]`) {
		t.Fatalf("%v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != doc {
		t.Fatal("the file changed")
	}
}

func TestPrintLineDiff(t *testing.T) {
	var b bytes.Buffer
	printLineDiff(&b, "a\nb\nc\n", "a\nb2\nb3\nc\n")
	if b.String() != "-b\n+b2\n+b3\n" {
		t.Fatalf("%q", b.String())
	}
}
