package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/domain"
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

// TestDirectModeAnnouncer: the line is printed by the session that starts
// a direct-mode sandbox only.
func TestDirectModeAnnouncer(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	os.MkdirAll(ws, 0o755)
	a, err := domain.New("default", ws, filepath.Join(base, "data"), filepath.Join(base, "run"), "")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	g := &globalOptions{io: IO{ErrOut: &b}}
	g.directModeAnnouncer(&config.Profile{}, a)()
	if !strings.Contains(b.String(), "direct mode: the agent writes "+ws) || strings.Count(b.String(), "\n") != 1 {
		t.Errorf("starting a direct-mode sandbox: %q", b.String())
	}
	b.Reset()
	g.directModeAnnouncer(&config.Profile{GitMode: "branch"}, a)()
	os.MkdirAll(filepath.Dir(a.ControlSocket()), 0o700)
	os.WriteFile(a.ControlSocket(), nil, 0o600)
	g.directModeAnnouncer(&config.Profile{}, a)()
	if b.Len() != 0 {
		t.Errorf("branch mode or joining a running sandbox printed %q", b.String())
	}
}
