package review

import (
	"context"
	"fmt"
	"os"

	"github.com/lazaret-dev/lazaret/internal/domain"
	"github.com/lazaret-dev/lazaret/internal/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/hostgit"
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
	m := gitrepo.RefMap{Profile: a.Profile}
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
