package main

import (
	"slices"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/deptest"
)

// TestDependencies: lazaret-kube is one process, the Kubernetes backend's
// CLI; it links nothing of the local CLI's, the coordinator's, the
// shim's, the sidecar's or the sandbox's packages.
func TestDependencies(t *testing.T) {
	deptest.OnlyProcesses(t, "lazaret-kube", []string{"."}, "kube-cli")
}

// TestLinksClientGo is the positive control of cmd/lazaret's
// TestNoKubernetes: the same ban fails for the binary that does link
// client-go.
func TestLinksClientGo(t *testing.T) {
	if !slices.Contains(deptest.Deps(t, "."), "k8s.io/client-go/tools/remotecommand") {
		t.Fatal("lazaret-kube does not link client-go's remotecommand: the ban of cmd/lazaret's TestNoKubernetes proves nothing")
	}
}

// TestNoNftables: a cluster pod's netd filters DNS only (gVisor's netstack
// has no nftables); lazaret-kube handles the policy as data.
func TestNoNftables(t *testing.T) {
	deptest.Forbid(t, "lazaret-kube", []string{"."}, map[string]string{
		"github.com/google/nftables": "only lazaret-netd installs rules (internal/sidecar/firewall)",
	})
}
