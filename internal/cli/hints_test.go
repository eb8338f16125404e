package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/shim"
)

// TestInstalledDoc: a hint names the installed copy of a document when
// `make install` put one beside the binary, else its repository path.
func TestInstalledDoc(t *testing.T) {
	prefix := t.TempDir()
	exe := filepath.Join(prefix, "bin", "lazaret")
	if got := installedDoc(exe, "CONFIG.md"); got != "docs/CONFIG.md" {
		t.Fatalf("not installed: %q", got)
	}
	doc := filepath.Join(prefix, "share", "doc", "lazaret", "CONFIG.md")
	if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(doc, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := installedDoc(exe, "CONFIG.md"); got != doc {
		t.Fatalf("installed: %q, want %q", got, doc)
	}
}

func TestVerbLine(t *testing.T) {
	for _, tc := range [][3]string{{"stop", "", "`lazaret stop`"}, {"stop", "default", "`lazaret stop`"}, {"shell", "claude", "`lazaret shell claude`"}} {
		if got := verbLine(tc[0], tc[1]); got != tc[2] {
			t.Errorf("verbLine(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}

// TestShimExitIsSetup: the shim, which cannot link the CLI, exits with the
// CLI's "environment not ready" code.
func TestShimExitIsSetup(t *testing.T) {
	if shim.ExitSetup != exitSetup {
		t.Fatalf("shim exits %d, the CLI's setup code is %d", shim.ExitSetup, exitSetup)
	}
}
