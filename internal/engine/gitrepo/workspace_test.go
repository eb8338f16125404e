package gitrepo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

// TestChooseWorkspaceCases: the shared table both backends' tests run
// (internal/cli, internal/kubecli), here against the function itself;
// acceptable refuses $HOME as config.CheckWorkspace does.
func TestChooseWorkspaceCases(t *testing.T) {
	cases := gittest.WorkspaceCases(t, &OwnedByUser)
	home := os.Getenv("HOME")
	acceptable := func(d string) bool { return d != home }
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			mode := ""
			if c.Direct {
				mode = ModeDirect
			}
			got, err := ChooseWorkspace(c.Dir, c.Explicit, mode, acceptable)
			if err != nil {
				t.Fatal(err)
			}
			want := c.Want
			if want == "" {
				want = home // resolved, then refused by the caller's check
			}
			if got != want {
				t.Errorf("ChooseWorkspace(%q) = %q, want %q", c.Dir, got, want)
			}
		})
	}
	if _, err := ChooseWorkspace(filepath.Join(home, "missing"), false, "", acceptable); !errors.As(err, new(*WorkspaceDirError)) {
		t.Errorf("missing dir: %v", err)
	}
	f := filepath.Join(home, "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := ChooseWorkspace(f, true, "", acceptable); !errors.As(err, new(*WorkspaceDirError)) || err.Error() != "workspace "+f+": not a directory" {
		t.Errorf("a file: %v", err)
	}
}

// TestEnclosingRepo: the nearest .git above, if it is the user's and
// acceptable; with root, a real chown (the table simulates it).
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
	if got := EnclosingRepo(sub, yes); got != repo {
		t.Errorf("EnclosingRepo(%s) = %q, want %s", sub, got, repo)
	}
	if got := EnclosingRepo(sub, func(d string) bool { return d != repo }); got != "" {
		t.Errorf("a refused top level was taken: %q", got)
	}
	plain := filepath.Join(root, "plain", "x")
	os.MkdirAll(plain, 0o755)
	if got := EnclosingRepo(plain, yes); got != "" {
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
	if got := EnclosingRepo(mine, yes); got != shared {
		t.Fatalf("control: own repository not taken: %q", got)
	}
	for _, p := range []string{shared, filepath.Join(shared, ".git")} {
		if err := os.Chown(p, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	if got := EnclosingRepo(mine, yes); got != "" {
		t.Errorf("a .git owned by another user was taken: %q", got)
	}
}
