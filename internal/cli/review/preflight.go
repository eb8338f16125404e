package review

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
)

// Preflight is for the CLI that starts a sandbox, before it hands over to
// the detached coordinator (whose stderr is a log file): it resolves the
// mode and, in branch mode, reports the errors a start would hit (no
// commits, not a top level) and the one-time notice the user should see
// on their terminal (uncommitted host changes are not carried over) when
// the clone does not exist yet. It changes nothing.
func Preflight(ctx context.Context, g *hostgit.Git, a *domain.Anchor, gitMode string) (notice string, err error) {
	mode, err := gitrepo.ResolveMode(gitMode, a.Workspace)
	if err != nil || mode != gitrepo.ModeBranch {
		return "", err
	}
	repo, err := gitrepo.OpenHostRepo(ctx, g, a.Workspace)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(a.AgentClone()); err == nil {
		return "", nil
	}
	m := gitrepo.RefMapOf(a)
	if repo.ResolveRef(ctx, g, m.AgentRef()) != "" {
		return "", nil
	}
	head, err := repo.Head(ctx, g)
	if err != nil {
		return "", err
	}
	if dirty, err := repo.Dirty(ctx, g, true); err == nil && dirty != "" {
		return fmt.Sprintf("the host working tree has uncommitted changes; they are not in the agent's clone, which starts at commit %s on branch %s", head[:12], m.AgentBranch()), nil
	}
	return "", nil
}

// Lag is how the agent branch stands against the host's HEAD when a
// sandbox starts: the commits HEAD has that the agent's tip lacks
// (Behind) and the agent's commits HEAD lacks (Ahead). HeadBranch is the
// host's checked-out branch (short name; "" when HEAD is detached).
type Lag struct {
	Behind, Ahead int
	HeadBranch    string
}

// AgentBranchLag compares the agent branch of a's profile with the host's
// HEAD. The zero Lag (and no error) when there is nothing to compare:
// direct mode, no agent branch yet, or no commits. It changes nothing and
// runs host git only on the user's repository (rev-list, no hooks).
func AgentBranchLag(ctx context.Context, g *hostgit.Git, a *domain.Anchor, gitMode string) (Lag, error) {
	mode, err := gitrepo.ResolveMode(gitMode, a.Workspace)
	if err != nil || mode != gitrepo.ModeBranch {
		return Lag{}, err
	}
	repo, err := gitrepo.OpenHostRepo(ctx, g, a.Workspace)
	if err != nil {
		return Lag{}, err
	}
	agent := repo.ResolveRef(ctx, g, gitrepo.RefMapOf(a).AgentRef())
	head, err := repo.Head(ctx, g)
	if agent == "" || err != nil {
		return Lag{}, nil
	}
	out, err := g.RevListLeftRight(ctx, repo.TopLevel, head, agent)
	if err != nil {
		return Lag{}, err
	}
	var l Lag
	if _, err := fmt.Sscanf(out, "%d %d", &l.Behind, &l.Ahead); err != nil {
		return Lag{}, fmt.Errorf("rev-list --left-right --count: %q: %w", out, err)
	}
	l.HeadBranch = strings.TrimPrefix(repo.Branch(ctx, g), "refs/heads/")
	return l, nil
}
