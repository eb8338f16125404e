package main

import (
	"testing"

	"github.com/lazaret-dev/lazaret/internal/deptest"
)

// TestDependencies: the lazaret binary is two processes (the CLI and the
// detached coordinator); it links nothing of the shim's (cmd/lazaret-runsc),
// the sidecar's or the sandbox's processes.
func TestDependencies(t *testing.T) {
	deptest.OnlyProcesses(t, "lazaret", []string{"."}, "cli", "coordinator")
}

// TestNoKubernetes: client-go and the Kubernetes API types live in
// lazaret-kube; lazaret links none of them, nor the packages that wrap them.
func TestNoKubernetes(t *testing.T) {
	deptest.Forbid(t, "lazaret", []string{"."}, map[string]string{
		"k8s.io/": "the Kubernetes backend is the lazaret-kube binary",
		deptest.Module + "/internal/adapter/kube":    "the Kubernetes adapter belongs to lazaret-kube",
		deptest.Module + "/internal/engine/kubespec": "the Kubernetes objects belong to lazaret-kube",
	})
}

// TestNoNftables: only the network sidecar installs firewall rules; the
// CLI and the coordinator handle the policy as data (internal/engine/netpolicy).
func TestNoNftables(t *testing.T) {
	deptest.Forbid(t, "lazaret", []string{"."}, map[string]string{
		"github.com/google/nftables":                  "only lazaret-netd installs rules (internal/sidecar/firewall)",
		deptest.Module + "/internal/sidecar/firewall": "only lazaret-netd installs rules",
	})
}
