package proposal

import (
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/policycheck"
)

// FuzzCheck: whatever the sandbox sends as a proposal, checking it never
// panics; the same proposal checked twice has the same hash, and an exec candidate's
// rule is exactly the agent's words (never another rule than proposed).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"example.org", "*", "10.0.0.1", "*.com", "xn--e1afmkfd.org:443", "[::1]:80", "make lint", "go vet ./...", "a\tb", "\"x y\"", "npm test {args}"} {
		f.Add(true, s)
		f.Add(false, s)
	}
	pol := policycheck.Policy{Domains: []string{"pypi.org"}, SecretHosts: []string{"api.example.com"}}
	f.Fuzz(func(t *testing.T, isNet bool, s string) {
		kind, target, argv := "net", s, []string(nil)
		if !isNet {
			kind, target, argv = "exec", "", strings.Split(s, " ")
		}
		r, err := check(pol, kind, target, argv)
		if err != nil {
			return
		}
		again, _ := check(pol, kind, target, argv)
		if h := hash(r); h != hash(again) || len(h) != 64 {
			t.Fatal("the same proposal checked twice has another hash")
		}
		if !isNet && !r.Refused() && r.Rule != strings.Join(argv, " ") {
			t.Fatalf("exec rule %q from %q", r.Rule, argv)
		}
	})
}
