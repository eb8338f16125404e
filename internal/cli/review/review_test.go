package review

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

// agentRepo is a repository whose lazaret/agent-p branch has one commit
// changing a.txt's first line to agentLine.
func agentRepo(t testing.TB, agentLine string) (string, *Review) {
	ws := gittest.NewRepo(t)
	gittest.Git(t, ws, "checkout", "-q", "-b", "lazaret/agent-p")
	gittest.Write(t, filepath.Join(ws, "a.txt"), agentLine+"\ntwo\nthree\n")
	gittest.Git(t, ws, "commit", "-q", "-am", "agent change")
	return ws, reviewOnMain(t, ws)
}

func TestMerge(t *testing.T) {
	ctx := context.Background()
	t.Run("fast-forward", func(t *testing.T) {
		ws, r := agentRepo(t, "AGENT")
		res, err := r.Merge(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if res.After != gittest.Git(t, ws, "rev-parse", "lazaret/agent-p") || res.Branch != "main" {
			t.Errorf("merge result %+v", res)
		}
		if res, err := r.Merge(ctx, false); err != nil || !res.UpToDate {
			t.Errorf("second merge: %+v, %v", res, err)
		}
	})
	t.Run("squash", func(t *testing.T) {
		ws, r := agentRepo(t, "AGENT")
		gittest.Git(t, ws, "commit", "-q", "--allow-empty", "-m", "host moved on")
		if _, err := r.Merge(ctx, true); err != nil {
			t.Fatal(err)
		}
		if parents := strings.Fields(gittest.Git(t, ws, "log", "-1", "--format=%P")); len(parents) != 1 {
			t.Errorf("squash made a merge commit: %v", parents)
		}
		if data, _ := os.ReadFile(filepath.Join(ws, "a.txt")); !strings.HasPrefix(string(data), "AGENT") {
			t.Errorf("squash content: %q", data)
		}
		if st := gittest.Git(t, ws, "status", "--porcelain"); st != "" {
			t.Errorf("tree not clean after squash: %q", st)
		}
	})
	t.Run("dirty", func(t *testing.T) {
		ws, r := agentRepo(t, "AGENT")
		gittest.Write(t, filepath.Join(ws, "a.txt"), "mine\n")
		before := gittest.Snapshot(t, ws)
		if _, err := r.Merge(ctx, false); !errors.Is(err, ErrDirtyTree) {
			t.Fatalf("err = %v, want ErrDirtyTree", err)
		}
		if after := gittest.Snapshot(t, ws); after != before {
			t.Errorf("repository changed by a refused merge")
		}
	})
	for _, squash := range []bool{false, true} {
		t.Run(fmt.Sprintf("conflict squash=%v", squash), func(t *testing.T) {
			ws, r := agentRepo(t, "AGENT")
			gittest.Write(t, filepath.Join(ws, "a.txt"), "HOST\ntwo\nthree\n")
			gittest.Git(t, ws, "commit", "-q", "-am", "host change")
			gittest.Write(t, filepath.Join(ws, "untracked"), "keep me\n")
			before := gittest.Snapshot(t, ws)
			_, err := r.Merge(ctx, squash)
			if !errors.Is(err, ErrMergeConflict) {
				t.Fatalf("err = %v, want ErrMergeConflict", err)
			}
			if after := gittest.Snapshot(t, ws); after != before {
				t.Errorf("repository changed by a failed merge:\n%s\n---\n%s", before, after)
			}
			gitDir := gittest.Git(t, ws, "rev-parse", "--absolute-git-dir")
			for _, f := range []string{"MERGE_HEAD", "MERGE_MSG", "SQUASH_MSG", "AUTO_MERGE"} {
				if _, err := os.Stat(filepath.Join(gitDir, f)); err == nil {
					t.Errorf("%s left behind", f)
				}
			}
		})
	}
	t.Run("detached", func(t *testing.T) {
		ws, r := agentRepo(t, "AGENT")
		gittest.Git(t, ws, "checkout", "-q", "--detach")
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
		gittest.Git(t, ws, "config", "core.hooksPath", ".githooks")
		gittest.Git(t, ws, "checkout", "-q", "lazaret/agent-p")
		for _, h := range []string{"post-merge", "pre-merge-commit", "post-checkout", "post-commit", "reference-transaction"} {
			gittest.Write(t, filepath.Join(ws, ".githooks", h), "#!/bin/sh\necho "+h+" >> "+marker+"\n")
		}
		gittest.Git(t, ws, "add", ".githooks")
		gittest.Git(t, ws, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "plant hooks")
		gittest.Git(t, ws, "-c", "core.hooksPath=/dev/null", "checkout", "-q", "main")
		gittest.Git(t, ws, "-c", "core.hooksPath=/dev/null", "commit", "-q", "--allow-empty", "-m", "host") // force a real merge
		if control {
			gittest.Git(t, ws, "merge", "-q", "--no-edit", "lazaret/agent-p")
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
	ws := gittest.NewRepo(t)
	a := gittest.Anchor(t, ws, "p1")
	if n, err := Preflight(ctx, g, a, ""); err != nil || n != "" {
		t.Errorf("clean repository: %q, %v", n, err)
	}
	gittest.Write(t, filepath.Join(ws, "new.txt"), "x")
	if n, err := Preflight(ctx, g, a, ""); err != nil || !strings.Contains(n, "uncommitted") {
		t.Errorf("dirty repository: %q, %v", n, err)
	}
	if n, _ := Preflight(ctx, g, a, "direct"); n != "" {
		t.Errorf("direct mode: %q", n)
	}
	empty := filepath.Join(t.TempDir(), "e")
	os.MkdirAll(empty, 0o755)
	gittest.Git(t, empty, "init", "-q")
	if _, err := Preflight(ctx, g, gittest.Anchor(t, empty, "p1"), ""); !errors.Is(err, gitrepo.ErrNoCommits) {
		t.Errorf("no commits: %v", err)
	}
}

// TestReviewRunsNoDriver: the agent's branch selects a textconv driver
// through .gitattributes and carries a signed-looking commit; with the
// repository set up to run a command for both, lazaret diff and log run
// neither. Control: plain git diff and log of the same commits do.
func TestReviewRunsNoDriver(t *testing.T) {
	ws, r := agentRepo(t, "AGENT")
	marks := t.TempDir()
	gpg := filepath.Join(marks, "gpg.sh")
	gittest.Write(t, gpg, "#!/bin/sh\ntouch "+filepath.Join(marks, "gpg")+"\nexit 1\n")
	gittest.Git(t, ws, "config", "diff.tc.textconv", "touch "+filepath.Join(marks, "textconv")+"; cat")
	gittest.Git(t, ws, "config", "diff.external", "touch "+filepath.Join(marks, "external")+" #")
	gittest.Git(t, ws, "config", "log.showSignature", "true")
	gittest.Git(t, ws, "config", "gpg.program", gpg)
	gittest.Git(t, ws, "checkout", "-q", "lazaret/agent-p")
	gittest.Write(t, filepath.Join(ws, ".gitattributes"), "* diff=tc\n")
	gittest.Git(t, ws, "add", ".gitattributes")
	gittest.Git(t, ws, "commit", "-q", "-m", "attributes")
	raw := gittest.Git(t, ws, "cat-file", "commit", "HEAD")
	signed := strings.Replace(raw, "\n\n", "\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEz\n -----END PGP SIGNATURE-----\n\n", 1)
	cmd := exec.Command("git", "-C", ws, "hash-object", "-t", "commit", "-w", "--stdin")
	cmd.Stdin = strings.NewReader(signed + "\n")
	oid, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, ws, "update-ref", "refs/heads/lazaret/agent-p", strings.TrimSpace(string(oid)))
	gittest.Git(t, ws, "checkout", "-q", "main")
	// Attributes come from the working tree (as after a merge).
	gittest.Write(t, filepath.Join(ws, ".gitattributes"), "* diff=tc\n")
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
	gittest.Git(t, ws, "log", "-1", "lazaret/agent-p")
	gittest.Git(t, ws, "diff", "main", "lazaret/agent-p")
	gittest.Git(t, ws, "diff", "--no-ext-diff", "main", "lazaret/agent-p")
	for _, m := range []string{"gpg", "external", "textconv"} {
		if _, err := os.Stat(filepath.Join(marks, m)); err != nil {
			t.Errorf("control: plain git ran no %s", m)
		}
	}
}

// reviewOnMain checks ws out on main and opens a Review of its agent
// branch lazaret/agent-p.
func reviewOnMain(t testing.TB, ws string) *Review {
	gittest.Git(t, ws, "checkout", "-q", "main")
	g := &hostgit.Git{}
	repo, err := gitrepo.OpenHostRepo(context.Background(), g, ws)
	if err != nil {
		t.Fatal(err)
	}
	return &Review{Git: g, Repo: repo, Map: gitrepo.RefMap{Profile: "p"}}
}

// TestAgentBranchLag: the agent branch's commits behind and ahead of the
// host's HEAD, counted on the user's repository.
func TestAgentBranchLag(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	ws := gittest.NewRepo(t)
	a := gittest.Anchor(t, ws, "p")
	if l, err := AgentBranchLag(ctx, g, a, ""); err != nil || l != (Lag{}) {
		t.Fatalf("no agent branch yet: %+v, %v", l, err)
	}
	gittest.Git(t, ws, "branch", "lazaret/agent-p")
	if l, err := AgentBranchLag(ctx, g, a, ""); err != nil || l.Behind != 0 || l.Ahead != 0 {
		t.Fatalf("at HEAD: %+v, %v", l, err)
	}
	for i := range 3 {
		gittest.Write(t, filepath.Join(ws, "host.txt"), fmt.Sprint(i))
		gittest.Git(t, ws, "add", "host.txt")
		gittest.Git(t, ws, "commit", "-q", "-m", "host work")
	}
	branch := strings.TrimSpace(gittest.Git(t, ws, "symbolic-ref", "--short", "HEAD"))
	if l, err := AgentBranchLag(ctx, g, a, ""); err != nil || l != (Lag{Behind: 3, HeadBranch: branch}) {
		t.Fatalf("behind: %+v, %v", l, err)
	}
	gittest.Git(t, ws, "checkout", "-q", "lazaret/agent-p")
	gittest.Write(t, filepath.Join(ws, "agent.txt"), "x")
	gittest.Git(t, ws, "add", "agent.txt")
	gittest.Git(t, ws, "commit", "-q", "-m", "agent work")
	gittest.Git(t, ws, "checkout", "-q", branch)
	if l, err := AgentBranchLag(ctx, g, a, ""); err != nil || l != (Lag{Behind: 3, Ahead: 1, HeadBranch: branch}) {
		t.Fatalf("behind and ahead: %+v, %v", l, err)
	}
	gittest.Git(t, ws, "checkout", "-q", "--detach")
	if l, _ := AgentBranchLag(ctx, g, a, ""); l.HeadBranch != "" || l.Behind != 3 {
		t.Fatalf("detached: %+v", l)
	}
	if l, _ := AgentBranchLag(ctx, g, a, "direct"); l != (Lag{}) {
		t.Fatalf("direct mode: %+v", l)
	}
}
