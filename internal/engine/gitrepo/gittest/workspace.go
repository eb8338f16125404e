package gittest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WorkspaceCase is one situation a command can be started in, and the
// Agent Workspace both backends must resolve it to (gitrepo.ChooseWorkspace):
// the local CLI's tests and lazaret-kube's run the same table.
type WorkspaceCase struct {
	Name string
	// Dir is the current directory, or --workspace when Explicit.
	Dir      string
	Explicit bool
	// Direct: the profile's git_mode is "direct".
	Direct bool
	// Want is the canonical workspace; "" when the start is refused (the
	// resolved directory is one config.CheckWorkspace refuses).
	Want string
}

// WorkspaceCases builds the situations under a temporary directory: a
// repository's subdirectory (through a symlink too, and with spaces in
// the path), a .git above owned by another user (simulated: the owner
// check reports those paths as another user's for the test's duration),
// a dotfiles repository in $HOME (set to a temp dir: the home directory
// may not be a workspace, so a project below it stays its own), an
// explicit --workspace, direct mode. owned is &gitrepo.OwnedByUser (a
// pointer, as gitrepo's own tests use this package).
func WorkspaceCases(t *testing.T, owned *func(string) bool) []WorkspaceCase {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := func(elem ...string) string { return filepath.Join(append([]string{root}, elem...)...) }
	for _, d := range []string{p("repo", "a", "b"), p("repo", ".git"), p("my repo", "sub dir"), p("my repo", ".git"),
		p("shared", "mine"), p("shared", ".git"), p("home", "proj"), p("home", ".git"), p("plain", "x")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(p("repo"), p("link")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", p("home"))
	ForeignOwner(t, owned, p("shared"))
	return []WorkspaceCase{
		{Name: "repository top level", Dir: p("repo"), Want: p("repo")},
		{Name: "repository subdir", Dir: p("repo", "a", "b"), Want: p("repo")},
		{Name: "symlinked subdir", Dir: p("link", "a"), Want: p("repo")},
		{Name: "spaces", Dir: p("my repo", "sub dir"), Want: p("my repo")},
		{Name: ".git above owned by another user", Dir: p("shared", "mine"), Want: p("shared", "mine")},
		{Name: "dotfiles repository in $HOME", Dir: p("home", "proj"), Want: p("home", "proj")},
		{Name: "no repository", Dir: p("plain", "x"), Want: p("plain", "x")},
		{Name: "explicit subdir", Dir: p("repo", "a"), Explicit: true, Want: p("repo", "a")},
		{Name: "explicit through a symlink", Dir: p("link"), Explicit: true, Want: p("repo")},
		{Name: "direct mode subdir", Dir: p("repo", "a", "b"), Direct: true, Want: p("repo", "a", "b")},
		{Name: "home itself", Dir: p("home"), Want: ""},
	}
}

// ForeignOwner makes the owner check *owned (&gitrepo.OwnedByUser) report
// every path at or below dir as another user's until the test ends: what
// chown would do, without root.
func ForeignOwner(t *testing.T, owned *func(string) bool, dir string) {
	t.Helper()
	prev := *owned
	*owned = func(path string) bool {
		if path == dir || strings.HasPrefix(path, dir+"/") {
			return false
		}
		return prev(path)
	}
	t.Cleanup(func() { *owned = prev })
}
