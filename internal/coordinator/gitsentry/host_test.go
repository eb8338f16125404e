package gitsentry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/domain"
	"github.com/lazaret-dev/lazaret/internal/hostgit"
)

// These tests run real host git on repositories in temporary directories.

func hg(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=T", "-c", "user.email=t@example.com",
		"-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func newRepo(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(dir, 0o755)
	hg(t, dir, "init", "-q")
	write(t, filepath.Join(dir, "a.txt"), "one\ntwo\nthree\n")
	hg(t, dir, "add", ".")
	hg(t, dir, "commit", "-q", "-m", "first")
	return dir
}

func testAnchor(t testing.TB, ws, profile string) *domain.Anchor {
	t.Helper()
	base := t.TempDir()
	a, err := domain.New(profile, ws, filepath.Join(base, "data"), filepath.Join(base, "run"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := domain.EnsurePrivateDir(a.Root()); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestGitEnvironmentIsFixed(t *testing.T) {
	repo := newRepo(t)
	marker := filepath.Join(t.TempDir(), "marker")
	t.Setenv("GIT_DIR", "/nonexistent")
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='touch "+marker+"'")
	g := &hostgit.Git{}
	r, err := OpenHostRepo(context.Background(), g, repo)
	if err != nil {
		t.Fatalf("OpenHostRepo with a hostile GIT_DIR in the environment: %v", err)
	}
	if _, err := r.Dirty(context.Background(), g, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("GIT_CONFIG_PARAMETERS from the environment reached git")
	}
	// Control: the same variable reaching git does run the command.
	cmd := exec.Command("git", "status", "--porcelain")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GIT_DIR="+filepath.Join(repo, ".git"))
	_ = cmd.Run()
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("control: an inherited GIT_CONFIG_PARAMETERS fsmonitor did not fire")
	}
}

func TestEnsureCloneVariants(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	cases := map[string]func(t *testing.T) (ws string, want string){
		"plain": func(t *testing.T) (string, string) {
			r := newRepo(t)
			return r, hg(t, r, "rev-parse", "HEAD")
		},
		"detached": func(t *testing.T) (string, string) {
			r := newRepo(t)
			hg(t, r, "commit", "-q", "--allow-empty", "-m", "second")
			hg(t, r, "checkout", "-q", "--detach", "HEAD~1")
			return r, hg(t, r, "rev-parse", "HEAD")
		},
		"hooksPath": func(t *testing.T) (string, string) {
			r := newRepo(t)
			hg(t, r, "config", "core.hooksPath", ".githooks")
			write(t, filepath.Join(r, ".githooks", "post-checkout"), "#!/bin/sh\ntouch "+filepath.Join(r, "..", "HOOK-RAN")+"\n")
			hg(t, r, "add", ".")
			hg(t, r, "commit", "-q", "--no-verify", "-m", "hooks")
			os.Remove(filepath.Join(r, "..", "HOOK-RAN"))
			return r, hg(t, r, "rev-parse", "HEAD")
		},
		"submodule": func(t *testing.T) (string, string) {
			sub := newRepo(t)
			r := newRepo(t)
			hg(t, r, "submodule", "-q", "add", sub, "sub")
			hg(t, r, "commit", "-q", "-m", "add sub")
			return r, hg(t, r, "rev-parse", "HEAD")
		},
		"worktree": func(t *testing.T) (string, string) {
			r := newRepo(t)
			wt := filepath.Join(t.TempDir(), "wt")
			hg(t, r, "worktree", "add", "-q", "-b", "wtb", wt)
			hg(t, wt, "commit", "-q", "--allow-empty", "-m", "in worktree")
			return wt, hg(t, wt, "rev-parse", "HEAD")
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			ws, want := setup(t)
			repo, err := OpenHostRepo(ctx, g, ws)
			if err != nil {
				t.Fatal(err)
			}
			if name == "worktree" && repo.CommonDir == repo.GitDir {
				t.Errorf("worktree: common dir %s = git dir", repo.CommonDir)
			}
			a := testAnchor(t, ws, "p1")
			before := snapshot(t, ws)
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
			if got := hg(t, ws, "rev-parse", "refs/heads/lazaret/agent-p1"); got != want {
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
			if after := snapshot(t, ws); after != before {
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
	hg(t, ws, "init", "-q")
	g := &hostgit.Git{}
	repo, err := OpenHostRepo(context.Background(), g, ws)
	if err != nil {
		t.Fatal(err)
	}
	a := testAnchor(t, ws, "p1")
	_, err = EnsureClone(context.Background(), g, repo, a, func(string, ...any) {})
	if !errors.Is(err, ErrNoCommits) {
		t.Fatalf("err = %v, want ErrNoCommits", err)
	}
	if entries, _ := os.ReadDir(a.Root()); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestEnsureCloneUncommittedNotice(t *testing.T) {
	ws := newRepo(t)
	write(t, filepath.Join(ws, "a.txt"), "changed\n")
	g := &hostgit.Git{}
	repo, _ := OpenHostRepo(context.Background(), g, ws)
	var notes []string
	if _, err := EnsureClone(context.Background(), g, repo, testAnchor(t, ws, "p1"), func(f string, a ...any) {
		notes = append(notes, fmt.Sprintf(f, a...))
	}); err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "uncommitted") {
		t.Errorf("notices = %q", notes)
	}
}

func TestResolveMode(t *testing.T) {
	repo := newRepo(t)
	plain := t.TempDir()
	for _, c := range []struct{ mode, ws, want string }{
		{"", repo, ModeBranch}, {"", plain, ModeDirect}, {"direct", repo, ModeDirect}, {"branch", repo, ModeBranch},
	} {
		if got, err := ResolveMode(c.mode, c.ws); err != nil || got != c.want {
			t.Errorf("ResolveMode(%q, %s) = %q, %v; want %q", c.mode, c.ws, got, err, c.want)
		}
	}
	if _, err := ResolveMode("branch", plain); !errors.Is(err, ErrBranchModeNeedsRepo) {
		t.Errorf("branch mode on a plain directory: %v", err)
	}
	sub := filepath.Join(repo, "sub")
	os.MkdirAll(sub, 0o755)
	if got, _ := ResolveMode("", sub); got != ModeDirect {
		t.Errorf("subdirectory of a repository: %q", got)
	}
}

func TestRepairCloneIgnoresPlantedSymlinks(t *testing.T) {
	ws := newRepo(t)
	g := &hostgit.Git{}
	repo, _ := OpenHostRepo(context.Background(), g, ws)
	a := testAnchor(t, ws, "p1")
	mustEnsureClone(t, context.Background(), g, repo, a, func(string, ...any) {})
	gitDir := filepath.Join(ClonePath(a), ".git")
	victim := filepath.Join(t.TempDir(), "victim")
	write(t, victim, "precious\n")
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

// snapshot is HEAD, index, every ref and the working tree of a repository.
func snapshot(t testing.TB, ws string) string {
	t.Helper()
	var b strings.Builder
	gitDir := hg(t, ws, "rev-parse", "--absolute-git-dir")
	for _, f := range []string{"HEAD", "index"} {
		data, _ := os.ReadFile(filepath.Join(gitDir, f))
		fmt.Fprintf(&b, "%s %x\n", f, sha256.Sum256(data))
	}
	for _, l := range strings.Split(hg(t, ws, "for-each-ref", "--format=%(objectname) %(refname)"), "\n") {
		if !strings.Contains(l, "lazaret/") {
			b.WriteString(l + "\n")
		}
	}
	var files []string
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p)
			files = append(files, fmt.Sprintf("%s %x", p, sha256.Sum256(data)))
		}
		return nil
	})
	sort.Strings(files)
	return b.String() + strings.Join(files, "\n")
}

// agentRepo is a repository whose lazaret/agent-p branch has one commit
// changing a.txt's first line to agentLine.
func agentRepo(t testing.TB, agentLine string) (string, *Review) {
	ws := newRepo(t)
	hg(t, ws, "checkout", "-q", "-b", "lazaret/agent-p")
	write(t, filepath.Join(ws, "a.txt"), agentLine+"\ntwo\nthree\n")
	hg(t, ws, "commit", "-q", "-am", "agent change")
	hg(t, ws, "checkout", "-q", "main")
	g := &hostgit.Git{}
	repo, err := OpenHostRepo(context.Background(), g, ws)
	if err != nil {
		t.Fatal(err)
	}
	return ws, &Review{Git: g, Repo: repo, Map: RefMap{Profile: "p"}}
}

func TestMerge(t *testing.T) {
	ctx := context.Background()
	t.Run("fast-forward", func(t *testing.T) {
		ws, r := agentRepo(t, "AGENT")
		res, err := r.Merge(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if res.After != hg(t, ws, "rev-parse", "lazaret/agent-p") || res.Branch != "main" {
			t.Errorf("merge result %+v", res)
		}
		if res, err := r.Merge(ctx, false); err != nil || !res.UpToDate {
			t.Errorf("second merge: %+v, %v", res, err)
		}
	})
	t.Run("squash", func(t *testing.T) {
		ws, r := agentRepo(t, "AGENT")
		hg(t, ws, "commit", "-q", "--allow-empty", "-m", "host moved on")
		if _, err := r.Merge(ctx, true); err != nil {
			t.Fatal(err)
		}
		if parents := strings.Fields(hg(t, ws, "log", "-1", "--format=%P")); len(parents) != 1 {
			t.Errorf("squash made a merge commit: %v", parents)
		}
		if data, _ := os.ReadFile(filepath.Join(ws, "a.txt")); !strings.HasPrefix(string(data), "AGENT") {
			t.Errorf("squash content: %q", data)
		}
		if st := hg(t, ws, "status", "--porcelain"); st != "" {
			t.Errorf("tree not clean after squash: %q", st)
		}
	})
	t.Run("dirty", func(t *testing.T) {
		ws, r := agentRepo(t, "AGENT")
		write(t, filepath.Join(ws, "a.txt"), "mine\n")
		before := snapshot(t, ws)
		if _, err := r.Merge(ctx, false); !errors.Is(err, ErrDirtyTree) {
			t.Fatalf("err = %v, want ErrDirtyTree", err)
		}
		if after := snapshot(t, ws); after != before {
			t.Errorf("repository changed by a refused merge")
		}
	})
	for _, squash := range []bool{false, true} {
		t.Run(fmt.Sprintf("conflict squash=%v", squash), func(t *testing.T) {
			ws, r := agentRepo(t, "AGENT")
			write(t, filepath.Join(ws, "a.txt"), "HOST\ntwo\nthree\n")
			hg(t, ws, "commit", "-q", "-am", "host change")
			write(t, filepath.Join(ws, "untracked"), "keep me\n")
			before := snapshot(t, ws)
			_, err := r.Merge(ctx, squash)
			if !errors.Is(err, ErrMergeConflict) {
				t.Fatalf("err = %v, want ErrMergeConflict", err)
			}
			if after := snapshot(t, ws); after != before {
				t.Errorf("repository changed by a failed merge:\n%s\n---\n%s", before, after)
			}
			gitDir := hg(t, ws, "rev-parse", "--absolute-git-dir")
			for _, f := range []string{"MERGE_HEAD", "MERGE_MSG", "SQUASH_MSG", "AUTO_MERGE"} {
				if _, err := os.Stat(filepath.Join(gitDir, f)); err == nil {
					t.Errorf("%s left behind", f)
				}
			}
		})
	}
	t.Run("detached", func(t *testing.T) {
		ws, r := agentRepo(t, "AGENT")
		hg(t, ws, "checkout", "-q", "--detach")
		if _, err := r.Merge(ctx, false); !errors.Is(err, ErrDetachedHead) {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestMergeRunsNoAgentHook: the agent's branch adds hooks under the
// repository's core.hooksPath; lazaret merge must not run them. Control:
// a plain `git merge` of the same branch runs them.
func TestMergeRunsNoAgentHook(t *testing.T) {
	for _, control := range []bool{false, true} {
		ws, r := agentRepo(t, "AGENT")
		marker := filepath.Join(t.TempDir(), "marker")
		hg(t, ws, "config", "core.hooksPath", ".githooks")
		hg(t, ws, "checkout", "-q", "lazaret/agent-p")
		for _, h := range []string{"post-merge", "pre-merge-commit", "post-checkout", "post-commit", "reference-transaction"} {
			write(t, filepath.Join(ws, ".githooks", h), "#!/bin/sh\necho "+h+" >> "+marker+"\n")
		}
		hg(t, ws, "add", ".githooks")
		hg(t, ws, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "plant hooks")
		hg(t, ws, "-c", "core.hooksPath=/dev/null", "checkout", "-q", "main")
		hg(t, ws, "-c", "core.hooksPath=/dev/null", "commit", "-q", "--allow-empty", "-m", "host") // force a real merge
		if control {
			hg(t, ws, "merge", "-q", "--no-edit", "lazaret/agent-p")
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("control: plain git merge ran no planted hook")
			}
			continue
		}
		if _, err := r.Merge(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		if data, err := os.ReadFile(marker); err == nil {
			t.Errorf("lazaret merge ran agent hooks: %s", data)
		}
	}
}

func TestPreflight(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	ws := newRepo(t)
	a := testAnchor(t, ws, "p1")
	if n, err := Preflight(ctx, g, a, ""); err != nil || n != "" {
		t.Errorf("clean repository: %q, %v", n, err)
	}
	write(t, filepath.Join(ws, "new.txt"), "x")
	if n, err := Preflight(ctx, g, a, ""); err != nil || !strings.Contains(n, "uncommitted") {
		t.Errorf("dirty repository: %q, %v", n, err)
	}
	if n, _ := Preflight(ctx, g, a, "direct"); n != "" {
		t.Errorf("direct mode: %q", n)
	}
	empty := filepath.Join(t.TempDir(), "e")
	os.MkdirAll(empty, 0o755)
	hg(t, empty, "init", "-q")
	if _, err := Preflight(ctx, g, testAnchor(t, empty, "p1"), ""); !errors.Is(err, ErrNoCommits) {
		t.Errorf("no commits: %v", err)
	}
}

// The coordinator finds BeforeStop through this interface (declared in
// internal/coord as BeforeStopper).
var _ interface{ BeforeStop(context.Context) } = (*Component)(nil)

// Submodules the host has initialised are checked out in the clone at the
// recorded commit, sharing the host's objects through the sandbox's path;
// the others stay empty with a notice, and a .gitmodules name that would
// leave .git/modules is never followed.
func TestEnsureCloneSubmodules(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	sub := newRepo(t)
	write(t, filepath.Join(sub, "lib.txt"), "library\n")
	hg(t, sub, "add", ".")
	hg(t, sub, "commit", "-q", "-m", "lib")
	other := newRepo(t)
	r := newRepo(t)
	hg(t, r, "submodule", "-q", "add", sub, "deps/sub")
	hg(t, r, "submodule", "-q", "add", other, "other")
	hg(t, r, "commit", "-q", "-m", "add submodules")
	// "other" is known to .gitmodules but not initialised on the host.
	hg(t, r, "submodule", "-q", "deinit", "-f", "other")
	if err := os.RemoveAll(filepath.Join(r, ".git", "modules", "other")); err != nil {
		t.Fatal(err)
	}
	// A hand-made entry whose name climbs out of .git/modules.
	subHead := hg(t, sub, "rev-parse", "HEAD")
	hg(t, r, "config", "--file", ".gitmodules", "submodule.../escape.path", "evil")
	hg(t, r, "update-index", "--add", "--cacheinfo", "160000,"+subHead+",evil")
	hg(t, r, "add", ".gitmodules")
	hg(t, r, "commit", "-q", "-m", "evil entry")
	// A real repository where that name leads, so that only the name
	// check stands between it and a checkout.
	hg(t, r, "clone", "-q", "--bare", sub, filepath.Join(r, ".git", "escape"))

	repo, err := OpenHostRepo(ctx, g, r)
	if err != nil {
		t.Fatal(err)
	}
	a := testAnchor(t, r, "p1")
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
func mustEnsureClone(t *testing.T, ctx context.Context, g *hostgit.Git, repo *HostRepo, a *domain.Anchor, notice func(string, ...any)) {
	t.Helper()
	c, err := EnsureClone(ctx, g, repo, a, notice)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestReviewRunsNoDriver: the agent's branch selects a textconv driver
// through .gitattributes and carries a signed-looking commit; with the
// repository set up to run a command for both, lazaret diff and log run
// neither. Control: plain git diff and log of the same commits do.
func TestReviewRunsNoDriver(t *testing.T) {
	ws, r := agentRepo(t, "AGENT")
	marks := t.TempDir()
	gpg := filepath.Join(marks, "gpg.sh")
	write(t, gpg, "#!/bin/sh\ntouch "+filepath.Join(marks, "gpg")+"\nexit 1\n")
	hg(t, ws, "config", "diff.tc.textconv", "touch "+filepath.Join(marks, "textconv")+"; cat")
	hg(t, ws, "config", "diff.external", "touch "+filepath.Join(marks, "external")+" #")
	hg(t, ws, "config", "log.showSignature", "true")
	hg(t, ws, "config", "gpg.program", gpg)
	hg(t, ws, "checkout", "-q", "lazaret/agent-p")
	write(t, filepath.Join(ws, ".gitattributes"), "* diff=tc\n")
	hg(t, ws, "add", ".gitattributes")
	hg(t, ws, "commit", "-q", "-m", "attributes")
	raw := hg(t, ws, "cat-file", "commit", "HEAD")
	signed := strings.Replace(raw, "\n\n", "\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEz\n -----END PGP SIGNATURE-----\n\n", 1)
	cmd := exec.Command("git", "-C", ws, "hash-object", "-t", "commit", "-w", "--stdin")
	cmd.Stdin = strings.NewReader(signed + "\n")
	oid, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	hg(t, ws, "update-ref", "refs/heads/lazaret/agent-p", strings.TrimSpace(string(oid)))
	hg(t, ws, "checkout", "-q", "main")
	// Attributes come from the working tree (as after a merge).
	write(t, filepath.Join(ws, ".gitattributes"), "* diff=tc\n")
	var out bytes.Buffer
	if err := r.Diff(context.Background(), &out, &out, false, ViewPipe); err != nil {
		t.Fatal(err)
	}
	if err := r.Log(context.Background(), &out, &out, false, ViewPipe); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadDir(marks); len(got) != 1 {
		t.Errorf("lazaret diff/log ran a driver: %v", got)
	}
	// Control.
	hg(t, ws, "log", "-1", "lazaret/agent-p")
	hg(t, ws, "diff", "main", "lazaret/agent-p")
	hg(t, ws, "diff", "--no-ext-diff", "main", "lazaret/agent-p")
	for _, m := range []string{"gpg", "external", "textconv"} {
		if _, err := os.Stat(filepath.Join(marks, m)); err != nil {
			t.Errorf("control: plain git ran no %s", m)
		}
	}
}
