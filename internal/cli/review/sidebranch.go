package review

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// SideBranches is ListSideBranches with each branch's count of commits
// the host's HEAD does not have.
func (r *Review) SideBranches(ctx context.Context) ([]gitrepo.SideBranch, error) {
	bs, err := gitrepo.ListSideBranches(ctx, r.Git, r.Repo, r.Map)
	if err != nil {
		return nil, err
	}
	head, _ := r.Repo.Head(ctx, r.Git)
	for i := range bs {
		n, err := r.Git.RevListCount(ctx, r.Repo.TopLevel, bs[i].Tip, head)
		if err != nil {
			return nil, err
		}
		if bs[i].Ahead, err = strconv.Atoi(strings.TrimSpace(n)); err != nil {
			return nil, fmt.Errorf("rev-list --count %s: %q: %w", bs[i].Ref, n, err)
		}
	}
	return bs, nil
}

// LogSide lists the commits of side branch b that the host's HEAD does
// not have, under a header line lazaret writes (the name escaped).
func (r *Review) LogSide(ctx context.Context, out, errOut io.Writer, b gitrepo.SideBranch, oneline bool, view View) error {
	fmt.Fprintf(out, "\n== side branch %s (%s, %s not in HEAD)\n", visible.Line(b.Name), visible.Line(b.Ref), gitrepo.Commits(b.Ahead))
	head, _ := r.Repo.Head(ctx, r.Git)
	return r.streamLog(ctx, out, errOut, view, oneline, b.Tip, head)
}
