package gitsentry

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

func vaultMode(t *testing.T, v string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(v)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestVaultSealedAndReopened: a new clone sits in a mode-000 vault, is
// reached through its descriptor, and a vault opened up by hand is sealed
// again at the next start.
func TestVaultSealedAndReopened(t *testing.T) {
	ws := gittest.NewRepo(t)
	g := &hostgit.Git{}
	repo, _ := gitrepo.OpenHostRepo(context.Background(), g, ws)
	a := gittest.Anchor(t, ws, "p1")
	c, err := EnsureClone(context.Background(), g, repo, a, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	if m := vaultMode(t, a.AgentClone()); m != 0 {
		t.Errorf("vault mode %v, want 000", m)
	}
	if data, err := os.ReadFile(filepath.Join(c.Path(), "a.txt")); err != nil || string(data) != "one\ntwo\nthree\n" {
		t.Errorf("clone through its descriptor: %q %v", data, err)
	}
	c.Close()
	os.Chmod(a.AgentClone(), 0o755)
	mustEnsureClone(t, context.Background(), g, repo, a, func(string, ...any) {})
	if m := vaultMode(t, a.AgentClone()); m != 0 {
		t.Errorf("vault left at %v after a start", m)
	}
}

// TestVaultMigratesLegacyClone: a clone made before the vault (the clone
// directly at <domain_root>/workspace) moves into the vault, work kept.
func TestVaultMigratesLegacyClone(t *testing.T) {
	ws := gittest.NewRepo(t)
	g := &hostgit.Git{}
	repo, _ := gitrepo.OpenHostRepo(context.Background(), g, ws)
	a := gittest.Anchor(t, ws, "p1")
	mustEnsureClone(t, context.Background(), g, repo, a, func(string, ...any) {})
	// Rebuild the old layout from the new one.
	v := a.AgentClone()
	os.Chmod(v, 0o700)
	legacy := filepath.Join(a.Root(), "legacy")
	if err := os.Rename(filepath.Join(v, "clone"), legacy); err != nil {
		t.Fatal(err)
	}
	os.Remove(v)
	os.Rename(legacy, v)
	gittest.Write(t, filepath.Join(v, "agent-work"), "kept\n")
	mustEnsureClone(t, context.Background(), g, repo, a, func(string, ...any) {})
	if m := vaultMode(t, v); m != 0 {
		t.Errorf("vault mode %v after migration", m)
	}
	if data, err := os.ReadFile(filepath.Join(ClonePath(a), "agent-work")); err != nil || string(data) != "kept\n" {
		t.Errorf("agent work after migration: %q %v", data, err)
	}
	if _, err := os.Lstat(filepath.Join(ClonePath(a), ".git", "HEAD")); err != nil {
		t.Errorf("migrated clone has no .git: %v", err)
	}
}
