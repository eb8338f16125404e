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
