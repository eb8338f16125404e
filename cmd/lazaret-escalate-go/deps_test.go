package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/deptest"
)

// TestDependencies keeps the in-sandbox client small: it must not link the
// CLI, the state store, the TUI, the shell parser or podman.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	forbidden := []string{
		"github.com/spf13/cobra", "go.etcd.io/bbolt", "charm.land/", "github.com/charmbracelet/",
		"mvdan.cc/sh/", "github.com/lazaret-dev/lazaret/internal/cli", "github.com/lazaret-dev/lazaret/internal/engine/store",
		"github.com/lazaret-dev/lazaret/internal/adapter/podman", "github.com/lazaret-dev/lazaret/internal/coordinator/escalation",
		"github.com/lazaret-dev/lazaret/internal/engine/eschost",
	}
	if f := deptest.Foreign(strings.Fields(string(out)), "in-sandbox"); len(f) > 0 {
		t.Errorf("lazaret-escalate links packages of another process: %v", f)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") {
				if dep != "github.com/lazaret-dev/lazaret/internal/wire/escwire" {
					t.Errorf("lazaret-escalate imports %s", dep)
				}
			}
		}
	}
}

// TestStatic builds the client as the release does and checks it has no
// dynamic loader: it runs in any image, whatever its libc.
func TestStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	out := filepath.Join(t.TempDir(), "lazaret-escalate")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("lazaret-escalate is dynamically linked")
		}
	}
}
