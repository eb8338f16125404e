package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/cli/review"
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

// TestStartAnnouncer: the direct-mode line is printed by the session that
// starts a direct-mode sandbox only; in branch mode the start says how far
// the agent branch is behind the host's HEAD, and nothing when it is not.
func TestStartAnnouncer(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	os.MkdirAll(ws, 0o755)
	a, err := domain.New("default", ws, filepath.Join(base, "data"), filepath.Join(base, "run"), "")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	g := &globalOptions{io: IO{ErrOut: &b}}
	g.startAnnouncer(ctx, &config.Profile{}, a)()
	if !strings.Contains(b.String(), "direct mode: the agent writes "+ws) || strings.Count(b.String(), "\n") != 1 {
		t.Errorf("starting a direct-mode sandbox: %q", b.String())
	}

	// Branch mode: a repository whose agent branch is at HEAD, then
	// two commits behind it.
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@t.invalid", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("commit", "-q", "--allow-empty", "-m", "one")
	git("branch", "lazaret/agent-default")
	b.Reset()
	g.startAnnouncer(ctx, &config.Profile{}, a)()
	if b.Len() != 0 {
		t.Errorf("agent branch at HEAD: %q", b.String())
	}
	git("commit", "-q", "--allow-empty", "-m", "two")
	git("commit", "-q", "--allow-empty", "-m", "three")
	g.startAnnouncer(ctx, &config.Profile{}, a)()
	if want := "lazaret: lazaret/agent-default is 2 commits behind your main: the agent goes on from its older tip (`lazaret reset-branch` starts it again from HEAD, keeping the old tip)\n"; b.String() != want {
		t.Errorf("agent branch behind: %q, want %q", b.String(), want)
	}

	b.Reset()
	os.MkdirAll(filepath.Dir(a.ControlSocket()), 0o700)
	os.WriteFile(a.ControlSocket(), nil, 0o600)
	g.startAnnouncer(ctx, &config.Profile{}, a)()
	g.startAnnouncer(ctx, &config.Profile{GitMode: "direct"}, a)()
	if b.Len() != 0 {
		t.Errorf("joining a running sandbox printed %q", b.String())
	}
}

func TestAgentLagNotice(t *testing.T) {
	if n := agentLagNotice(review.Lag{Ahead: 2}, "claude"); n != "" {
		t.Errorf("not behind: %q", n)
	}
	n := agentLagNotice(review.Lag{Behind: 1, Ahead: 2, HeadBranch: "fe\x1b[8mat"}, "claude")
	if want := "lazaret: lazaret/agent-claude is 1 commit behind your fe\\x1b[8mat and 2 commits ahead: the agent goes on from its own tip (review with `lazaret log claude`)"; n != want {
		t.Errorf("behind and ahead: %q, want %q", n, want)
	}
	if n := agentLagNotice(review.Lag{Behind: 3}, "default"); !strings.Contains(n, "3 commits behind your HEAD:") {
		t.Errorf("detached HEAD: %q", n)
	}
}
