package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/deptest"
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
		"github.com/lazaret-dev/lazaret/internal/engine/config",
		"github.com/lazaret-dev/lazaret/internal/adapter/podman",
		"github.com/lazaret-dev/lazaret/internal/engine/store",
		// The Kubernetes types are the backend's (internal/engine/netdpod):
		// netd in a pod reads files, it never speaks to the API.
		"k8s.io/",
		"sigs.k8s.io/",
		"github.com/lazaret-dev/lazaret/internal/engine/netdpod",
	}
	if f := deptest.Foreign(strings.Fields(string(out)), "sidecar"); len(f) > 0 {
		t.Errorf("lazaret-netd links packages of another process: %v", f)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
				t.Errorf("lazaret-netd imports %s", dep)
			}
		}
	}
}

// maxBinarySize is the budget of the stripped sidecar binary. The secret
// injector (crypto/tls, net/http with HTTP/2) took it from 3.7 to 8.0 MB
// (docs/SECRETS.md).
const maxBinarySize = 9 << 20

// TestBinarySizeAndStatic builds lazaret-netd as the release does and checks
// it fits the budget and has no dynamic loader (it runs FROM scratch).
func TestBinarySizeAndStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	out := filepath.Join(t.TempDir(), "lazaret-netd")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("go build: %v %s", err, b)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lazaret-netd: %d bytes", fi.Size())
	if fi.Size() > maxBinarySize {
		t.Errorf("lazaret-netd is %d bytes, budget %d", fi.Size(), maxBinarySize)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("lazaret-netd is dynamically linked")
		}
	}
}

// TestLinksNftables is the positive control of the other binaries'
// TestNoNftables: the same ban fails for the sidecar.
func TestLinksNftables(t *testing.T) {
	if !slices.Contains(deptest.Deps(t, "."), "github.com/google/nftables") {
		t.Fatal("lazaret-netd does not link nftables: the bans of TestNoNftables prove nothing")
	}
}
