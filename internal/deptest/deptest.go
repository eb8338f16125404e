// Package deptest checks, from a binary's or a process's tests, what
// `go list -deps` of a package links: every package of this module belongs
// to one process by its path (Processes) or to none (the shared leaves and
// adapters), and a process links no package of another. Tests only.
package deptest

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// Module is this module's path.
const Module = "github.com/lazaret-dev/lazaret"

// Processes are the path prefixes (under Module) of each process's
// packages. A package under none of them is shared: it imports nothing of
// a process.
var Processes = map[string][]string{
	"cli":         {"internal/cli"},
	"coordinator": {"internal/coordinator"},
	"shim":        {"internal/shim"},
	"sidecar":     {"internal/sidecar"},
	"in-sandbox":  {"internal/insandbox", "cmd/lazaret-escalate-go", "cmd/lazaret-fsmonitor"},
	// The Kubernetes backend's CLI, the lazaret-kube binary.
	"kube-cli": {"internal/kubecli", "cmd/lazaret-kube"},
}

// ProcessOf is the process pkg belongs to, "" for a shared package or one
// outside the module.
func ProcessOf(pkg string) string {
	rel, ok := strings.CutPrefix(pkg, Module+"/")
	if !ok {
		return ""
	}
	for proc, prefixes := range Processes {
		for _, p := range prefixes {
			if rel == p || strings.HasPrefix(rel, p+"/") {
				return proc
			}
		}
	}
	return ""
}

// Deps is `go list -deps` of patterns (run in the test's directory); the
// test is skipped when go list cannot run.
func Deps(t *testing.T, patterns ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, patterns...)...).Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	return strings.Fields(string(out))
}

// Foreign returns the packages of deps that belong to a process other
// than allowed, sorted.
func Foreign(deps []string, allowed ...string) []string {
	var bad []string
	for _, d := range deps {
		if p := ProcessOf(d); p != "" && !contains(allowed, p) {
			bad = append(bad, d+" ("+p+")")
		}
	}
	sort.Strings(bad)
	return bad
}

// OnlyProcesses fails t for every package of another process than allowed
// that patterns link.
func OnlyProcesses(t *testing.T, what string, patterns []string, allowed ...string) {
	t.Helper()
	for _, d := range Foreign(Deps(t, patterns...), allowed...) {
		t.Errorf("%s links %s: a package of another process", what, d)
	}
}

// Forbid fails t for every dependency of patterns under a banned prefix;
// bans maps the prefix to the reason.
func Forbid(t *testing.T, what string, patterns []string, bans map[string]string) {
	t.Helper()
	for _, d := range Deps(t, patterns...) {
		for prefix, why := range bans {
			if d == prefix || strings.HasPrefix(d, strings.TrimSuffix(prefix, "/")+"/") {
				t.Errorf("%s links %s: %s", what, d, why)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
