package gitsentry

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestMain gives host git a HOME of its own with a committer identity, so
// the tests neither depend on nor read the machine's global git
// configuration (a fresh CI machine has none, and merges need one).
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "gitsentry-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg := "[user]\n\tname = Lazaret Test\n\temail = test@lazaret.invalid\n[init]\n\tdefaultBranch = main\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(cfg), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("HOME", home)
	os.Unsetenv("XDG_CONFIG_HOME")
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}
