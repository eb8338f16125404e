package main

import (
	"testing"

	"github.com/lazaret-dev/lazaret/internal/deptest"
)

// TestDependencies: the fsmonitor runs in the sandbox, started for every
// git status; it links no host process's package and none of their
// libraries.
func TestDependencies(t *testing.T) {
	deptest.OnlyProcesses(t, "lazaret-fsmonitor", []string{"."}, "in-sandbox")
	deptest.Forbid(t, "lazaret-fsmonitor", []string{"."}, map[string]string{
		"github.com/spf13/cobra": "no CLI in the sandbox",
		"go.etcd.io/bbolt":       "the state store is the coordinator's",
		"github.com/lazaret-dev/lazaret/internal/adapter/podman":  "podman runs on the host",
		"github.com/lazaret-dev/lazaret/internal/adapter/hostgit": "host git runs on the host",
		"github.com/lazaret-dev/lazaret/internal/engine/store":    "the state store is the coordinator's",
	})
}
