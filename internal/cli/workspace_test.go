package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/cli/review"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

// TestWorkspaceResolution: the local CLI resolves every situation of the
// shared table (gittest.WorkspaceCases, run by lazaret-kube's tests too)
// to the same workspace, so `lazaret audit` reads the state store of the
// Domain Anchor that `lazaret --backend kubernetes` writes.
func TestWorkspaceResolution(t *testing.T) {
	cases := gittest.WorkspaceCases(t, &gitrepo.OwnedByUser)
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	data := filepath.Join(t.TempDir(), "data")
	cfg, err := config.Parse("", []byte("data_root = \""+data+"\"\n[profiles.direct]\nimage = \"localhost/x\"\ngit_mode = \"direct\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			g := &globalOptions{io: IO{ErrOut: io.Discard}}
			explicit, profile := "", "default"
			if c.Explicit {
				explicit = c.Dir
			} else {
				t.Chdir(c.Dir)
			}
			if c.Direct {
				profile = "direct"
			}
			_, a, err := g.resolveDomain(cfg, profile, explicit)
			if c.Want == "" {
				if err == nil {
					t.Fatalf("resolved to %s, want a refusal", a.Workspace)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Workspace != c.Want || a.Hash != domain.Hash(profile, c.Want) {
				t.Errorf("workspace %s (%s), want %s", a.Workspace, a.Hash, c.Want)
			}
		})
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
