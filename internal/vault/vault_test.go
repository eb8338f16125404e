package vault

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func perm(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestSealOpen: Seal creates or closes a vault; Open creates and opens a
// directory in it and leaves the vault sealed; Names lists it.
func TestSealOpen(t *testing.T) {
	v := filepath.Join(t.TempDir(), "a", "v")
	t.Cleanup(func() { _ = os.Chmod(v, 0o700) })
	if err := Seal(v); err != nil {
		t.Fatal(err)
	}
	if got := perm(t, v); got != 0 {
		t.Fatalf("new vault mode %v", got)
	}
	if _, err := Open(v, "d", false, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a missing dir: %v", err)
	}
	d, err := Open(v, "d", true, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.Join("f"), []byte("x"), 0o600); err != nil {
		t.Fatalf("write through the descriptor: %v", err)
	}
	d.Close()
	if got := perm(t, v); got != 0 {
		t.Fatalf("vault after Open: %v", got)
	}
	names, err := Names(v)
	if err != nil || !slices.Equal(names, []string{"d"}) {
		t.Fatalf("names %v %v", names, err)
	}
	if err := os.Chmod(v, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Seal(v); err != nil || perm(t, v) != 0 {
		t.Fatalf("reseal: %v %v", err, perm(t, v))
	}
}

// TestOpenRefusesSymlink: a symlink in the vault is never followed.
func TestOpenRefusesSymlink(t *testing.T) {
	v := filepath.Join(t.TempDir(), "v")
	if err := os.Mkdir(v, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(v, "d")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(v, 0o700) })
	if _, err := Open(v, "d", false, 0); err == nil {
		t.Fatal("a symlink was opened")
	}
	if f := filepath.Join(t.TempDir(), "file"); os.WriteFile(f, nil, 0o600) == nil {
		if err := Seal(f); err == nil {
			t.Fatal("a file was taken for a vault")
		}
	}
}
