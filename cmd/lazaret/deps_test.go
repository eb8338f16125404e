package main

import (
	"testing"

	"github.com/lazaret-dev/lazaret/internal/deptest"
)

// TestDependencies: the lazaret binary is three processes (the CLI, the
// detached coordinator, the runsc shim), dispatched by main; it links
// nothing of the sidecar's or the sandbox's processes.
func TestDependencies(t *testing.T) {
	deptest.OnlyProcesses(t, "lazaret", []string{"."}, "cli", "coordinator", "shim")
}

// TestNoKubernetes: client-go and the Kubernetes API types live in
// lazaret-kube; lazaret (also the runsc shim, whose start is timed) links
// none of them, nor the packages that wrap them.
func TestNoKubernetes(t *testing.T) {
	deptest.Forbid(t, "lazaret", []string{"."}, map[string]string{
		"k8s.io/":                             "the Kubernetes backend is the lazaret-kube binary",
		deptest.Module + "/internal/kube":     "the Kubernetes adapter belongs to lazaret-kube",
		deptest.Module + "/internal/kubespec": "the Kubernetes objects belong to lazaret-kube",
	})
}
