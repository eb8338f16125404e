package main

import (
	"testing"

	"github.com/lazaret-dev/lazaret/internal/deptest"
)

// TestDependencies: the shim links its own process's packages and shared
// leaves only, so that its start stays small.
func TestDependencies(t *testing.T) {
	deptest.OnlyProcesses(t, "lazaret-runsc", []string{"."}, "shim")
}
