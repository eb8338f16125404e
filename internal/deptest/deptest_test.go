package deptest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestProcessOf(t *testing.T) {
	for pkg, want := range map[string]string{
		Module + "/internal/cli":                   "cli",
		Module + "/internal/cli/review":            "cli",
		Module + "/internal/client":                "",
		Module + "/internal/coordinator/gitsentry": "coordinator",
		Module + "/internal/sidecar/netd":          "sidecar",
		Module + "/internal/insandbox/fsmonitor":   "in-sandbox",
		Module + "/internal/insandbox/escclient":   "in-sandbox",
		Module + "/internal/engine/gitrepo":        "",
		"github.com/spf13/cobra":                   "",
		Module + "/internal/coordinatorx":          "",
		Module + "/internal/kubecli":               "kube-cli",
		Module + "/cmd/lazaret-kube":               "kube-cli",
		Module + "/internal/adapter/kube":          "",
		// The control server and the hubs a sandbox's sessions are held
		// by: the coordinator's and lazaret-kube's.
		Module + "/internal/engine/ctlserver": "",
		Module + "/internal/engine/approvals": "",
	} {
		if got := ProcessOf(pkg); got != want {
			t.Errorf("ProcessOf(%s) = %q, want %q", pkg, got, want)
		}
	}
}

// TestForeignControl is the positive control of the process tests: a
// coordinator package among a CLI's dependencies is reported.
func TestForeignControl(t *testing.T) {
	deps := []string{Module + "/internal/cli/review", Module + "/internal/engine/gitrepo", Module + "/internal/coordinator/gitsentry"}
	if got := Foreign(deps, "cli"); !slices.Equal(got, []string{Module + "/internal/coordinator/gitsentry (coordinator)"}) {
		t.Fatalf("Foreign = %q", got)
	}
	if got := Foreign(deps, "cli", "coordinator"); len(got) != 0 {
		t.Fatalf("Foreign with both allowed = %q", got)
	}
}

// TestProcessesLinkNoOtherProcess: each process's packages, with all they
// link, belong to that process or to none.
func TestProcessesLinkNoOtherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for proc, prefixes := range Processes {
		var patterns []string
		for _, p := range prefixes {
			patterns = append(patterns, "../../"+p+"/...")
		}
		OnlyProcesses(t, "process "+proc, patterns, proc)
	}
}

// TestSharedLinksNoProcess: a package of no process (a wire type, config,
// an adapter) links no process's package, so every process may use it.
func TestSharedLinksNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "../../...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	var shared []string
	for _, p := range strings.Fields(string(out)) {
		if ProcessOf(p) == "" && !strings.HasPrefix(p, Module+"/cmd/") && !strings.HasPrefix(p, Module+"/tools/") {
			shared = append(shared, p)
		}
	}
	OnlyProcesses(t, "the shared packages", shared)
}
