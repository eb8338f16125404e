package gitsentry

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/cli/review"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
	"github.com/lazaret-dev/lazaret/internal/engine/refsync"
	"github.com/lazaret-dev/lazaret/internal/engine/refsync/refsynctest"
)

// TestRebuiltCloneKeepsSideBranches: a clone built while the host keeps
// side branches of the agent (after reset-branch, or a lost clone) has
// them as branches again, so the ref sync, which mirrors deletions, keeps
// the host refs. Control: the same sync against a clone without them (the
// build before this change) deletes the host ref.
func TestRebuiltCloneKeepsSideBranches(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	ws := gittest.NewRepo(t)
	base := gittest.Git(t, ws, "rev-parse", "HEAD")
	gittest.Git(t, ws, "commit", "-q", "--allow-empty", "-m", "side 1")
	gittest.Git(t, ws, "commit", "-q", "--allow-empty", "-m", "side 2")
	feature := gittest.Git(t, ws, "rev-parse", "HEAD")
	gittest.Git(t, ws, "reset", "-q", "--hard", base)
	m := gitrepo.RefMap{Profile: "p1"}
	gittest.Git(t, ws, "update-ref", m.SideRefPrefix()+"feature", feature)
	repo, err := gitrepo.OpenHostRepo(ctx, g, ws)
	if err != nil {
		t.Fatal(err)
	}
	r := &review.Review{Git: g, Repo: repo, Map: m}
	bs, err := r.SideBranches(ctx)
	if err != nil || len(bs) != 1 || bs[0].Name != "feature" || bs[0].Tip != feature || bs[0].Ahead != 2 {
		t.Fatalf("SideBranches = %+v, %v", bs, err)
	}
	a := gittest.Anchor(t, ws, "p1")
	mustEnsureClone(t, ctx, g, repo, a, func(string, ...any) {})
	tip, err := os.ReadFile(filepath.Join(ClonePath(a), ".git", "refs", "heads", "feature"))
	if err != nil || strings.TrimSpace(string(tip)) != feature {
		t.Fatalf("clone's feature branch = %q, %v; want %s", tip, err, feature)
	}

	s := &refsync.Syncer{Git: g, Repo: repo, Map: m, Sandbox: refsynctest.Local{Dir: ClonePath(a)}}
	res, err := s.Sync(ctx)
	if err != nil || len(res.Deleted) != 0 {
		t.Fatalf("sync with the rebuilt clone: %+v, %v", res, err)
	}
	// Control: a clone without the side branch loses the host ref.
	gittest.Git(t, ClonePath(a), "update-ref", "-d", "refs/heads/feature")
	res, err = s.Sync(ctx)
	if err != nil || !slices.Equal(res.Deleted, []string{m.SideRefPrefix() + "feature"}) {
		t.Fatalf("control: sync without the branch = %+v, %v; want the host ref deleted", res, err)
	}
}
