package gitsentry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

// These tests run real host git on repositories in temporary directories.

func TestEnsureCloneVariants(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	cases := map[string]func(t *testing.T) (ws string, want string){
		"plain": func(t *testing.T) (string, string) {
			r := gittest.NewRepo(t)
			return r, gittest.Git(t, r, "rev-parse", "HEAD")
		},
		"detached": func(t *testing.T) (string, string) {
			r := gittest.NewRepo(t)
			gittest.Git(t, r, "commit", "-q", "--allow-empty", "-m", "second")
			gittest.Git(t, r, "checkout", "-q", "--detach", "HEAD~1")
			return r, gittest.Git(t, r, "rev-parse", "HEAD")
		},
		"hooksPath": func(t *testing.T) (string, string) {
			r := gittest.NewRepo(t)
			gittest.Git(t, r, "config", "core.hooksPath", ".githooks")
			gittest.Write(t, filepath.Join(r, ".githooks", "post-checkout"), "#!/bin/sh\ntouch "+filepath.Join(r, "..", "HOOK-RAN")+"\n")
			gittest.Git(t, r, "add", ".")
			gittest.Git(t, r, "commit", "-q", "--no-verify", "-m", "hooks")
			os.Remove(filepath.Join(r, "..", "HOOK-RAN"))
			return r, gittest.Git(t, r, "rev-parse", "HEAD")
		},
		"submodule": func(t *testing.T) (string, string) {
			sub := gittest.NewRepo(t)
			r := gittest.NewRepo(t)
			gittest.Git(t, r, "submodule", "-q", "add", sub, "sub")
			gittest.Git(t, r, "commit", "-q", "-m", "add sub")
			return r, gittest.Git(t, r, "rev-parse", "HEAD")
		},
		"worktree": func(t *testing.T) (string, string) {
			r := gittest.NewRepo(t)
			wt := filepath.Join(t.TempDir(), "wt")
			gittest.Git(t, r, "worktree", "add", "-q", "-b", "wtb", wt)
			gittest.Git(t, wt, "commit", "-q", "--allow-empty", "-m", "in worktree")
			return wt, gittest.Git(t, wt, "rev-parse", "HEAD")
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			ws, want := setup(t)
			repo, err := gitrepo.OpenHostRepo(ctx, g, ws)
			if err != nil {
				t.Fatal(err)
			}
			if name == "worktree" && repo.CommonDir == repo.GitDir {
				t.Errorf("worktree: common dir %s = git dir", repo.CommonDir)
			}
			a := gittest.Anchor(t, ws, "p1")
			before := gittest.Snapshot(t, ws)
			mustEnsureClone(t, ctx, g, repo, a, func(string, ...any) {})
			clone := ClonePath(a)
			head, _ := os.ReadFile(filepath.Join(clone, ".git", "HEAD"))
			if string(head) != "ref: refs/heads/lazaret/agent-p1\n" {
				t.Errorf("clone HEAD = %q", head)
			}
			tip, _ := os.ReadFile(filepath.Join(clone, ".git", "refs", "heads", "lazaret", "agent-p1"))
			if strings.TrimSpace(string(tip)) != want {
				t.Errorf("clone branch at %q, want %s", tip, want)
			}
			if _, err := os.Stat(filepath.Join(clone, "a.txt")); err != nil {
				t.Errorf("clone not checked out: %v", err)
			}
			if got := gittest.Git(t, ws, "rev-parse", "refs/heads/lazaret/agent-p1"); got != want {
				t.Errorf("host agent branch at %s, want %s", got, want)
			}
			alt, _ := os.ReadFile(filepath.Join(clone, ".git", "objects", "info", "alternates"))
			if string(alt) != "/run/lazaret/host.git/objects\n" {
				t.Errorf("alternates = %q", alt)
			}
			cfg, _ := os.ReadFile(filepath.Join(clone, ".git", "config"))
			if !strings.Contains(string(cfg), "path = /run/lazaret/host.git/config") {
				t.Errorf("clone config:\n%s", cfg)
			}
			if fi, err := os.Stat(filepath.Join(clone, ".git", "hooks")); err != nil || !fi.IsDir() {
				t.Errorf("no hooks mount target: %v", err)
			}
			if _, err := os.Stat(filepath.Join(ws, "..", "HOOK-RAN")); err == nil {
				t.Errorf("a hook ran while the clone was made")
			}
			if after := gittest.Snapshot(t, ws); after != before {
				t.Errorf("host repository changed:\n%s\n---\n%s", before, after)
			}
			// A second start reuses the clone.
			os.WriteFile(filepath.Join(clone, "agent-file"), []byte("x"), 0o644)
			mustEnsureClone(t, ctx, g, repo, a, func(string, ...any) {})
			if _, err := os.Stat(filepath.Join(clone, "agent-file")); err != nil {
				t.Errorf("clone not kept across starts")
			}
		})
	}
}

func TestEnsureCloneNoCommits(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "empty")
	os.MkdirAll(ws, 0o755)
	gittest.Git(t, ws, "init", "-q")
	g := &hostgit.Git{}
	repo, err := gitrepo.OpenHostRepo(context.Background(), g, ws)
	if err != nil {
		t.Fatal(err)
	}
	a := gittest.Anchor(t, ws, "p1")
	_, err = EnsureClone(context.Background(), g, repo, a, func(string, ...any) {})
	if !errors.Is(err, gitrepo.ErrNoCommits) {
		t.Fatalf("err = %v, want gitrepo.ErrNoCommits", err)
	}
	if entries, _ := os.ReadDir(a.Root()); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestEnsureCloneUncommittedNotice(t *testing.T) {
	ws := gittest.NewRepo(t)
	gittest.Write(t, filepath.Join(ws, "a.txt"), "changed\n")
	g := &hostgit.Git{}
	repo, _ := gitrepo.OpenHostRepo(context.Background(), g, ws)
	var notes []string
	if _, err := EnsureClone(context.Background(), g, repo, gittest.Anchor(t, ws, "p1"), func(f string, a ...any) {
		notes = append(notes, fmt.Sprintf(f, a...))
	}); err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "uncommitted") {
		t.Errorf("notices = %q", notes)
	}
}

func TestRepairCloneIgnoresPlantedSymlinks(t *testing.T) {
	ws := gittest.NewRepo(t)
	g := &hostgit.Git{}
	repo, _ := gitrepo.OpenHostRepo(context.Background(), g, ws)
	a := gittest.Anchor(t, ws, "p1")
	mustEnsureClone(t, context.Background(), g, repo, a, func(string, ...any) {})
	gitDir := filepath.Join(ClonePath(a), ".git")
	victim := filepath.Join(t.TempDir(), "victim")
	gittest.Write(t, victim, "precious\n")
	victimDir := t.TempDir()
	os.Remove(filepath.Join(gitDir, "objects", "info", "alternates"))
	os.Symlink(victim, filepath.Join(gitDir, "objects", "info", "alternates"))
	os.RemoveAll(filepath.Join(gitDir, "hooks"))
	os.Symlink(victimDir, filepath.Join(gitDir, "hooks"))
	os.Remove(filepath.Join(gitDir, "config"))
	os.Symlink(victim, filepath.Join(gitDir, "config"))
	if err := RepairClone(ClonePath(a)); err != nil { // as root (unit tests), the vault does not stop us
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(victim); string(data) != "precious\n" {
		t.Errorf("victim overwritten: %q", data)
	}
	for _, n := range []string{"hooks", "config", "objects/info/alternates"} {
		fi, err := os.Lstat(filepath.Join(gitDir, n))
		if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
			t.Errorf("%s still a symlink (%v)", n, err)
		}
	}
}

// The coordinator finds BeforeStop through this interface (declared in
// internal/coordinator as BeforeStopper).
var _ interface{ BeforeStop(context.Context) } = (*Component)(nil)

// Submodules the host has initialised are checked out in the clone at the
// recorded commit, sharing the host's objects through the sandbox's path;
// the others stay empty with a notice, and a .gitmodules name that would
// leave .git/modules is never followed.
func TestEnsureCloneSubmodules(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	sub := gittest.NewRepo(t)
	gittest.Write(t, filepath.Join(sub, "lib.txt"), "library\n")
	gittest.Git(t, sub, "add", ".")
	gittest.Git(t, sub, "commit", "-q", "-m", "lib")
	other := gittest.NewRepo(t)
	r := gittest.NewRepo(t)
	gittest.Git(t, r, "submodule", "-q", "add", sub, "deps/sub")
	gittest.Git(t, r, "submodule", "-q", "add", other, "other")
	gittest.Git(t, r, "commit", "-q", "-m", "add submodules")
	// "other" is known to .gitmodules but not initialised on the host.
	gittest.Git(t, r, "submodule", "-q", "deinit", "-f", "other")
	if err := os.RemoveAll(filepath.Join(r, ".git", "modules", "other")); err != nil {
		t.Fatal(err)
	}
	// A hand-made entry whose name climbs out of .git/modules.
	subHead := gittest.Git(t, sub, "rev-parse", "HEAD")
	gittest.Git(t, r, "config", "--file", ".gitmodules", "submodule.../escape.path", "evil")
	gittest.Git(t, r, "update-index", "--add", "--cacheinfo", "160000,"+subHead+",evil")
	gittest.Git(t, r, "add", ".gitmodules")
	gittest.Git(t, r, "commit", "-q", "-m", "evil entry")
	// A real repository where that name leads, so that only the name
	// check stands between it and a checkout.
	gittest.Git(t, r, "clone", "-q", "--bare", sub, filepath.Join(r, ".git", "escape"))

	repo, err := gitrepo.OpenHostRepo(ctx, g, r)
	if err != nil {
		t.Fatal(err)
	}
	a := gittest.Anchor(t, r, "p1")
	var notices []string
	mustEnsureClone(t, ctx, g, repo, a, func(f string, args ...any) { notices = append(notices, fmt.Sprintf(f, args...)) })
	clone := ClonePath(a)
	if b, err := os.ReadFile(filepath.Join(clone, "deps", "sub", "lib.txt")); err != nil || string(b) != "library\n" {
		t.Errorf("submodule not checked out: %q, %v", b, err)
	}
	dotGit, _ := os.ReadFile(filepath.Join(clone, "deps", "sub", ".git"))
	if string(dotGit) != "gitdir: ../../.git/modules/deps/sub\n" {
		t.Errorf("deps/sub/.git = %q", dotGit)
	}
	mod := filepath.Join(clone, ".git", "modules", "deps", "sub")
	if head, _ := os.ReadFile(filepath.Join(mod, "HEAD")); strings.TrimSpace(string(head)) != subHead {
		t.Errorf("submodule HEAD = %q, want %s", head, subHead)
	}
	if alt, _ := os.ReadFile(filepath.Join(mod, "objects", "info", "alternates")); string(alt) != "/run/lazaret/host.git/modules/deps/sub/objects\n" {
		t.Errorf("submodule alternates = %q", alt)
	}
	cfg, _ := os.ReadFile(filepath.Join(mod, "config"))
	if !strings.Contains(string(cfg), "path = /run/lazaret/host.git/modules/deps/sub/config") || !strings.Contains(string(cfg), "worktree = ../../../../deps/sub") {
		t.Errorf("submodule config:\n%s", cfg)
	}
	if entries, _ := os.ReadDir(filepath.Join(clone, "other")); len(entries) != 0 {
		t.Errorf("uninitialised submodule populated: %v", entries)
	}
	if entries, _ := os.ReadDir(filepath.Join(clone, "evil")); len(entries) != 0 {
		t.Errorf("escaping submodule populated: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(clone, ".git", "escape")); err == nil {
		t.Error("a repository was made outside .git/modules")
	}
	joined := strings.Join(notices, "\n")
	for _, want := range []string{"submodule other is not initialised on the host", `submodule "../escape" at "evil"`} {
		if !strings.Contains(joined, want) {
			t.Errorf("notices %q: missing %q", notices, want)
		}
	}
}

// mustEnsureClone makes or reuses the clone and closes it.
func mustEnsureClone(t *testing.T, ctx context.Context, g *hostgit.Git, repo *gitrepo.HostRepo, a *domain.Anchor, notice func(string, ...any)) {
	t.Helper()
	c, err := EnsureClone(ctx, g, repo, a, notice)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
