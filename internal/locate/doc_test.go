package locate

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDocBeside: a hint names the installed copy of a document when
// `make install` put one beside the binary, else its repository path.
func TestDocBeside(t *testing.T) {
	prefix := t.TempDir()
	exe := filepath.Join(prefix, "bin", "lazaret")
	if got := docBeside(exe, "CONFIG.md"); got != "docs/CONFIG.md" {
		t.Fatalf("not installed: %q", got)
	}
	doc := filepath.Join(prefix, "share", "doc", "lazaret", "CONFIG.md")
	if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(doc, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := docBeside(exe, "CONFIG.md"); got != doc {
		t.Fatalf("installed: %q, want %q", got, doc)
	}
}
