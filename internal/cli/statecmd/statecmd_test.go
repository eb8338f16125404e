package statecmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
)

// TestInspectRefusesOpenPath: `lazaret state` says what a start would
// refuse, before it opens (and so re-seals) the vault, and leaves the
// modes as it found them.
func TestInspectRefusesOpenPath(t *testing.T) {
	base := t.TempDir()
	for _, p := range []string{filepath.Dir(base), base} {
		os.Chmod(p, 0o755)
	}
	data := filepath.Join(base, "data")
	root := filepath.Join(data, "claude", "overlay")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{data, filepath.Dir(root), root} {
		os.Chmod(p, 0o755)
	}
	st := statestore.Store{Root: root, Shared: true, DataRoot: data}
	_, err := Inspect(context.Background(), &podman.Client{Bin: "/nonexistent/podman"}, st, []string{"/usr"})
	if !errors.Is(err, statestore.ErrExposed) {
		t.Fatalf("want the exposure, got %v", err)
	}
	if fi, _ := os.Lstat(root); fi.Mode().Perm() != 0o755 {
		t.Errorf("state changed the vault's mode: %v", fi.Mode())
	}
}
