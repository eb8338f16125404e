package domain

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// mkdirMode makes dir with exactly mode (whatever the umask).
func mkdirMode(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// TestRepairModes: a domain whose gitsentry/ directory (and State Anchor
// directories) came out 0600 — the damage of a umask changed while they
// were made — gets its modes back; symlinks and their targets are left
// alone. The starting modes are the positive control: they are the
// broken ones (as the lazaret user, writing into gitsentry/ fails before
// the repair: checked below when not root, and in integration).
func TestRepairModes(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	mkdirMode(t, ws, 0o755)
	a, err := New("default", ws, filepath.Join(dir, "data"), filepath.Join(dir, "run"), "")
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(a.Root(), "overlay")
	changes, work, merged := a.OverlayPaths("/usr")
	// Children first: their parents become unenterable.
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{
		{a.RuntimeDir, 0o700}, {changes, 0o600}, {work, 0o700}, {merged, 0o755},
		{filepath.Join(ov, ".empty"), 0}, {ov, 0o600}, {a.GitSentryDir(), 0o600}, {a.Root(), 0o600},
	} {
		mkdirMode(t, d.path, d.mode)
	}
	// The TLS dir is a symlink to somebody's directory: never followed.
	outside := filepath.Join(dir, "outside")
	mkdirMode(t, outside, 0o600)
	probe := filepath.Join(a.GitSentryDir(), "system.gitconfig.tmp")
	if os.Geteuid() != 0 {
		if err := os.WriteFile(probe, nil, 0o600); err == nil {
			t.Fatal("positive control: wrote into a 0600 gitsentry/ directory")
		}
	}
	if err := os.Symlink(outside, a.TLSDir()); err != nil {
		t.Fatal(err)
	}

	fixed, err := a.RepairModes()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{
		a.Root(): 0o700, a.GitSentryDir(): 0o700, ov: 0, filepath.Join(ov, ".empty"): 0o755,
		changes: 0o755, work: 0o700, merged: 0o755, outside: 0o600, a.RuntimeDir: 0o700,
	}
	for p, m := range want {
		if got := modeOf(t, p).Perm(); got != m {
			t.Errorf("%s: mode %v, want %v", p, got, m)
		}
	}
	if modeOf(t, a.TLSDir())&os.ModeSymlink == 0 {
		t.Error("the TLS symlink was replaced")
	}
	if len(fixed) != 5 || !slices.Contains(fixed, a.GitSentryDir()) {
		t.Errorf("repaired %q, want root, gitsentry, overlay, .empty and usr_changes", fixed)
	}
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		t.Fatalf("after the repair: %v", err)
	}
}

// TestRepairModesLeavesOthersDirs: a directory owned by another user is
// not changed (needs root to set up). Control: the same directory owned
// by the user is.
func TestRepairModesLeavesOthersDirs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	dir := t.TempDir()
	a, err := New("default", dir, filepath.Join(dir, "data"), filepath.Join(dir, "run"), "")
	if err != nil {
		t.Fatal(err)
	}
	mkdirMode(t, a.Root(), 0o700)
	mkdirMode(t, a.GitSentryDir(), 0o600)
	if err := os.Chown(a.GitSentryDir(), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RepairModes(); err != nil {
		t.Fatal(err)
	}
	if got := modeOf(t, a.GitSentryDir()).Perm(); got != 0o600 {
		t.Fatalf("another user's directory changed to %v", got)
	}
	if err := os.Chown(a.GitSentryDir(), 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RepairModes(); err != nil {
		t.Fatal(err)
	}
	if got := modeOf(t, a.GitSentryDir()).Perm(); got != 0o700 {
		t.Fatalf("control: own directory left at %v", got)
	}
}
