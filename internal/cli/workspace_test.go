package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnclosingRepo(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(root, "repo")
	sub := filepath.Join(repo, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	yes := func(string) bool { return true }
	if got := enclosingRepo(sub, yes); got != repo {
		t.Errorf("enclosingRepo(%s) = %q, want %s", sub, got, repo)
	}
	if got := enclosingRepo(sub, func(d string) bool { return d != repo }); got != "" {
		t.Errorf("a refused top level was taken: %q", got)
	}
	plain := filepath.Join(root, "plain", "x")
	os.MkdirAll(plain, 0o755)
	if got := enclosingRepo(plain, yes); got != "" {
		t.Errorf("no repository around %s, got %q", plain, got)
	}
	if os.Getuid() != 0 {
		t.Skip("the planted-.git case needs root to chown")
	}
	// A .git another user planted in a shared parent is not taken;
	// control: the same layout owned by us is.
	shared := filepath.Join(root, "shared")
	mine := filepath.Join(shared, "mine")
	os.MkdirAll(mine, 0o755)
	os.Mkdir(filepath.Join(shared, ".git"), 0o755)
	if got := enclosingRepo(mine, yes); got != shared {
		t.Fatalf("control: own repository not taken: %q", got)
	}
	for _, p := range []string{shared, filepath.Join(shared, ".git")} {
		if err := os.Chown(p, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	if got := enclosingRepo(mine, yes); got != "" {
		t.Errorf("a .git owned by another user was taken: %q", got)
	}
}

func TestDirectModeNoticeOneLine(t *testing.T) {
	n := directModeNotice("/ws/\x1b[8mx\ny")
	if strings.Count(n, "\n") != 0 || strings.Contains(n, "\x1b") || !strings.Contains(n, "direct mode") {
		t.Errorf("notice %q", n)
	}
}
