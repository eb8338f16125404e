package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps lazaret-netd small and its attack surface narrow:
// the sidecar must not link the CLI, the state store or the TUI.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	forbidden := []string{
		"github.com/spf13/cobra",
		"go.etcd.io/bbolt",
		"charm.land/bubbletea",
		"charm.land/lipgloss",
		"github.com/charmbracelet/",
		"github.com/lazaret-dev/lazaret/internal/cli",
		"github.com/lazaret-dev/lazaret/internal/config",
		"github.com/lazaret-dev/lazaret/internal/podman",
		"github.com/lazaret-dev/lazaret/internal/store",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
				t.Errorf("lazaret-netd imports %s", dep)
			}
		}
	}
}
