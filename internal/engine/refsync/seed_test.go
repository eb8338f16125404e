package refsync_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
	"github.com/lazaret-dev/lazaret/internal/engine/refsync"
	"github.com/lazaret-dev/lazaret/internal/engine/refsync/refsynctest"
)

// TestSeedThenSync: a sandbox without a clone gets one from a bundle (the
// agent branch at the host's HEAD, a side branch the host keeps), the
// host's agent branch is created, a second Seed leaves the clone alone,
// and the agent's commit made in it comes back through Sync.
func TestSeedThenSync(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	ws := gittest.NewRepo(t)
	head := gittest.Git(t, ws, "rev-parse", "HEAD")
	m := gitrepo.RefMap{Profile: "p1"}
	gittest.Git(t, ws, "update-ref", m.SideRefPrefix()+"feature", head)
	repo, err := gitrepo.OpenHostRepo(ctx, g, ws)
	if err != nil {
		t.Fatal(err)
	}
	sb := refsynctest.Local{Dir: filepath.Join(t.TempDir(), "workspace")}
	seeded, start, err := refsync.Seed(ctx, g, repo, m, sb)
	if err != nil || !seeded || start != head {
		t.Fatalf("Seed = %v, %s, %v; want seeded at %s", seeded, start, err, head)
	}
	if b := gittest.Git(t, sb.Dir, "branch", "--show-current"); b != m.AgentBranch() {
		t.Fatalf("clone on %q, want %s", b, m.AgentBranch())
	}
	if f := gittest.Git(t, sb.Dir, "rev-parse", "refs/heads/feature"); f != head {
		t.Fatalf("side branch feature = %s", f)
	}
	if tip := gittest.Git(t, ws, "rev-parse", m.AgentRef()); tip != head {
		t.Fatalf("host agent branch = %s", tip)
	}
	if seeded, _, err := refsync.Seed(ctx, g, repo, m, sb); err != nil || seeded {
		t.Fatalf("second Seed = %v, %v; want the clone left alone", seeded, err)
	}
	gittest.Git(t, sb.Dir, "commit", "-q", "--allow-empty", "-m", "agent work")
	work := gittest.Git(t, sb.Dir, "rev-parse", "HEAD")
	s := &refsync.Syncer{Git: g, Repo: repo, Map: m, Sandbox: sb}
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if tip := gittest.Git(t, ws, "rev-parse", m.AgentRef()); tip != work {
		t.Fatalf("host agent branch after sync = %s, want %s", tip, work)
	}
}

// TestSeedRefusesAnUnexpectedAnswer: a sandbox that answers anything but
// the script's words gets no bundle.
func TestSeedRefusesAnUnexpectedAnswer(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	ws := gittest.NewRepo(t)
	repo, err := gitrepo.OpenHostRepo(ctx, g, ws)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = refsync.Seed(ctx, g, repo, gitrepo.RefMap{Profile: "p1"}, liar{})
	if !errors.Is(err, refsync.ErrSeedFailed) {
		t.Fatalf("Seed against a liar = %v", err)
	}
	if strings.ContainsRune(err.Error(), 0x1b) {
		t.Fatalf("the sandbox's stderr reaches the terminal raw: %q", err)
	}
}

type liar struct{}

func (liar) Name() string { return "liar" }
func (liar) Start(ctx context.Context, _ []string) (*refsync.Proc, error) {
	return refsynctest.Local{Dir: "/nonexistent"}.Start(ctx, []string{"sh", "-c", "echo gimme; echo '\x1b[8mhidden' >&2"})
}
