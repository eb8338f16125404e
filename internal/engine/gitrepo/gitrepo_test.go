package gitrepo

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

func TestResolveMode(t *testing.T) {
	repo := gittest.NewRepo(t)
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

func TestGitEnvironmentIsFixed(t *testing.T) {
	repo := gittest.NewRepo(t)
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

func TestRefMap(t *testing.T) {
	m := RefMap{Profile: "dev"}
	for in, want := range map[string]string{
		"refs/heads/lazaret/agent-dev": "refs/heads/lazaret/agent-dev",
		"refs/heads/main":              "refs/lazaret/dev/heads/main",
		"refs/heads/old/1":             "refs/lazaret/dev/heads/old/1",
	} {
		got, err := m.HostRef(in)
		if err != nil || got != want {
			t.Errorf("HostRef(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"refs/tags/v1", "refs/heads/../x", "HEAD", "refs/remotes/origin/main"} {
		if _, err := m.HostRef(in); err == nil {
			t.Errorf("HostRef(%q) accepted", in)
		}
	}
}

func TestValidBranch(t *testing.T) {
	good := []string{"main", "lazaret/agent-x", "feature/a.b", "v1.2", "a-b_c+d@e"}
	bad := []string{"", "-x", "a..b", "a/.b", "a.lock", "a/b.lock/c", "a//b", "/a", "a/", "a.", "@", "a@{1}",
		"a b", "a\tb", "a~1", "a^", "a:b", "a?", "a*", "a[", `a\b`, "a\x7f", "é", "a\nb", `a"b`, strings.Repeat("a", 201)}
	for _, n := range good {
		if err := ValidBranch(n); err != nil {
			t.Errorf("ValidBranch(%q) = %v, want nil", n, err)
		}
	}
	for _, n := range bad {
		if ValidBranch(n) == nil {
			t.Errorf("ValidBranch(%q) = nil, want error", n)
		}
	}
}

// TestSideSummaryEscapes: names shown in the summary line go through
// visible.Line (a host ref made by hand may hold anything git allows).
func TestSideSummaryEscapes(t *testing.T) {
	got := SideSummary([]SideBranch{{Name: "a\u202eb", Ahead: 1}, {Name: "x\x1b[8m", Ahead: 3}})
	if strings.ContainsAny(got, "\u202e\x1b") || !strings.Contains(got, "(1 commit)") || !strings.Contains(got, "(3 commits)") {
		t.Errorf("SideSummary = %q", got)
	}
}
