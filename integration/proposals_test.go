//go:build integration

package integration

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// TestProposals: the proposal loop against real rootless podman + runsc
// (docs/POLICY.md). The agent (a non-interactive exec) proposes a name,
// gets an id, and the user approves it by id and hash: the running
// sandbox's policy allows it at once (net check, which reads netd's live
// policy; there is no real DNS on these machines to resolve it). A stale
// hash is refused and changes nothing (positive control: the same
// approval with the shown hash works); a denied proposal leaves the
// policy unchanged and --wait exits 1; a proposal for a private address
// is refused at once with nothing stored; the audit trail holds the
// proposals and decisions with the checker's version and the policy hash.
func TestProposals(t *testing.T) {
	e := NewEnv(t)
	// A comment of the user's, which --save keeps.
	e.WriteConfig("# my network, reviewed\n[network]\nallow_domains = [\"pypi.org\"] # for pip\n")
	background(t, e, nil, "exec", "--", "sleep", "600") // keeps the sandbox up
	Eventually(t, 2*time.Minute, "the sandbox running", func() bool { return netRunning(e) })
	agent := func(args ...string) Result {
		return e.Run(append([]string{"exec", "--", "/run/lazaret/bin/lazaret-escalate"}, args...)...)
	}
	if r := e.Run("exec", "--", "sh", "-c", "getent hosts example.org; echo rc=$?"); !strings.Contains(r.Stdout, "rc=2") {
		t.Fatalf("example.org resolves before any rule: %+v", r)
	}
	if r := agent("--denials"); r.Code != 0 || !strings.Contains(r.Stdout, "dns example.org") {
		t.Errorf("--denials does not list the denied lookup: %+v", r)
	}

	r := agent("--propose", "net", "example.org", "--why", "test")
	id := strings.TrimSpace(r.Stdout)
	if r.Code != 0 || !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(id) || !strings.Contains(r.Stderr, "awaits the user's decision") {
		t.Fatalf("propose: %+v", r)
	}
	var shown struct {
		Hash, Rule, Status, Why string
		CheckerVersion          int `json:"checker_version"`
	}
	if err := json.Unmarshal([]byte(e.MustRun("proposals", "show", id, "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Rule != "example.org" || shown.Status != "pending" || shown.Why != "test" || len(shown.Hash) != 64 {
		t.Fatalf("show: %+v", shown)
	}
	if l := e.MustRun("proposals"); !strings.Contains(l, id) || !strings.Contains(l, "allow_domains += example.org") {
		t.Errorf("list:\n%s", l)
	}

	stale := e.Run("proposals", "approve", id, "--hash", strings.Repeat("0", 64))
	if stale.Code == 0 || !strings.Contains(stale.Stderr, "show it again") {
		t.Fatalf("a stale hash was accepted: %+v", stale)
	}
	if c := e.Run("net", "check", "example.org").Code; c != 1 {
		t.Fatalf("a stale approval changed the policy (net check exit %d)", c)
	}
	ok := e.Run("proposals", "approve", id, "--hash", shown.Hash, "--reason", "docs", "--save")
	if ok.Code != 0 || !strings.Contains(ok.Stdout, "is in force") {
		t.Fatalf("approve: %+v", ok)
	}
	// --save wrote the rule into the file, comments and all, and said so.
	saved, err := os.ReadFile(e.Config)
	if err != nil || !strings.Contains(string(saved), "# my network, reviewed\n") || !strings.Contains(string(saved), "# for pip") ||
		!strings.Contains(string(saved), `"example.org"`) || !strings.Contains(ok.Stdout+ok.Stderr, "+") {
		t.Fatalf("--save: %v\n%s\n%+v", err, saved, ok)
	}
	if _, err := config.Load(e.Config); err != nil {
		t.Fatalf("the saved file does not load: %v", err)
	}
	if c := e.Run("net", "check", "example.org").Code; c != 0 {
		t.Fatalf("approved name not allowed (net check exit %d)", c)
	}
	if w := agent("--wait", id); w.Code != 0 {
		t.Errorf("--wait of an approved proposal: %+v", w)
	}

	d := agent("--propose", "net", "denied.example", "--why", "test")
	did := strings.TrimSpace(d.Stdout)
	if d.Code != 0 || e.Run("proposals", "deny", did, "--reason", "no").Code != 0 {
		t.Fatalf("propose/deny: %+v", d)
	}
	if c := e.Run("net", "check", "denied.example").Code; c != 1 {
		t.Errorf("a denied proposal changed the policy (net check exit %d)", c)
	}
	if w := agent("--wait", did); w.Code != 1 || !strings.Contains(w.Stderr, "denied") {
		t.Errorf("--wait of a denied proposal: %+v", w)
	}

	before := e.MustRun("proposals", "--json")
	p := agent("--propose", "net", "10.0.0.1")
	if p.Code != 126 || !strings.Contains(p.Stderr, "refused") || p.Stdout != "" {
		t.Errorf("10.0.0.1: %+v", p)
	}
	if after := e.MustRun("proposals", "--json"); after != before {
		t.Errorf("a refused proposal was stored:\n%s", after)
	}
	// A burst from one session: the first 5 are taken, the rest refused
	// at once by the rate limit (nothing stored for them).
	burst := e.Run("exec", "--", "sh", "-c", `for i in 1 2 3 4 5 6 7 8; do lazaret-escalate --propose net burst$i.example >/dev/null 2>&1; echo "rc=$?"; done`)
	if strings.Count(burst.Stdout, "rc=0") != 5 || strings.Count(burst.Stdout, "rc=126") != 3 {
		t.Errorf("burst of 8: %q", burst.Stdout)
	}
	if l := e.MustRun("proposals"); strings.Contains(l, "burst6.example") || !strings.Contains(l, "burst5.example") {
		t.Errorf("rate-limited proposals stored:\n%s", l)
	}
	if r := e.Run("exec", "--", "true"); r.Code != 0 {
		t.Errorf("the sandbox stopped working: %+v", r)
	}
	// On a terminal: the proposal is shown like a prompt (the candidate
	// and the checker's findings) and its [A] approves it; the agent's
	// --wait then exits 0 and the name is allowed.
	sh := startPTY(t, e, "exec", "-t", "--", "sh", "-c",
		`id=$(lazaret-escalate --propose net pty.example --why "from a pty"); lazaret-escalate --wait "$id"; echo "rc=$?"`)
	sh.waitFor("abort lazaret")
	waitReadable()
	for _, want := range []string{"the agent proposes a policy rule", "allow_domains += pty.example", "findings: the checker found nothing", "from a pty"} {
		if !strings.Contains(sh.output(), want) {
			t.Errorf("the terminal's prompt lacks %q:\n%s", want, sh.output())
		}
	}
	sh.send("a")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("terminal:\n%s", sh.output())
		}
	})
	sh.waitFor("rc=0")
	if c := e.Run("net", "check", "pty.example").Code; c != 0 || sh.exit() != 0 {
		t.Errorf("approved on the terminal: net check exit %d, output:\n%s", c, sh.output())
	}
	t.Logf("propose: %s%s\napprove: %s%s\n10.0.0.1: %s", r.Stdout, r.Stderr, ok.Stdout, ok.Stderr, p.Stderr)
	trail := e.MustRun("audit", "--json")
	for _, want := range []string{`"change":"proposal"`, `"checker_version":"1"`, `"change":"proposal decision"`, `"decision":"approved"`,
		`"decision":"denied"`, `"policy_hash":"`, `"outcome":"refused by the checker"`} {
		if !strings.Contains(trail, want) {
			t.Errorf("audit trail lacks %s", want)
		}
	}
}
