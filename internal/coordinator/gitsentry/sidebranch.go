package gitsentry

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/hostgit"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// SideBranch is one of the agent's other branches as the host holds it
// (refs/lazaret/<p>/heads/<Name>). Name is the agent's: escape it before
// showing it (visible.Line).
type SideBranch struct {
	Name  string
	Ref   string // host ref
	Tip   string
	Ahead int // commits the host's HEAD does not have
}

// ListSideBranches returns the host copies of the agent's other branches,
// sorted by name. Refs whose names lazaret would not have synced (made on
// the host by hand) are listed too: they are the user's.
func ListSideBranches(ctx context.Context, g *hostgit.Git, repo *HostRepo, m RefMap) ([]SideBranch, error) {
	out, err := repo.gitCommon(ctx, g, "for-each-ref", "--format=%(objectname) %(refname)",
		strings.TrimSuffix(m.SideRefPrefix(), "/"))
	if err != nil {
		return nil, fmt.Errorf("listing %s*: %w", m.SideRefPrefix(), err)
	}
	var bs []SideBranch
	for _, l := range strings.Split(out, "\n") {
		oid, ref, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		bs = append(bs, SideBranch{Name: strings.TrimPrefix(ref, m.SideRefPrefix()), Ref: ref, Tip: oid})
	}
	return bs, nil
}

// SideBranches is ListSideBranches with each branch's count of commits
// the host's HEAD does not have.
func (r *Review) SideBranches(ctx context.Context) ([]SideBranch, error) {
	bs, err := ListSideBranches(ctx, r.Git, r.Repo, r.Map)
	if err != nil {
		return nil, err
	}
	head, _ := r.Repo.Head(ctx, r.Git)
	for i := range bs {
		args := []string{"rev-list", "--count", bs[i].Tip}
		if head != "" {
			args = append(args, "--not", head)
		}
		n, err := r.Repo.git(ctx, r.Git, append(args, "--")...)
		if err != nil {
			return nil, err
		}
		if bs[i].Ahead, err = strconv.Atoi(strings.TrimSpace(n)); err != nil {
			return nil, fmt.Errorf("rev-list --count %s: %q: %w", bs[i].Ref, n, err)
		}
	}
	return bs, nil
}

// Commits is "1 commit" or "n commits".
func Commits(n int) string {
	if n == 1 {
		return "1 commit"
	}
	return strconv.Itoa(n) + " commits"
}

// SideSummary is the one line naming the side branches, escaped:
// "feature (2 commits), fix (1 commit)".
func SideSummary(bs []SideBranch) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = visible.Line(b.Name) + " (" + Commits(b.Ahead) + ")"
	}
	return strings.Join(parts, ", ")
}

// LogSide lists the commits of side branch b that the host's HEAD does
// not have, under a header line lazaret writes (the name escaped).
func (r *Review) LogSide(ctx context.Context, out, errOut io.Writer, b SideBranch, oneline bool, view View) error {
	fmt.Fprintf(out, "\n== side branch %s (%s, %s not in HEAD)\n", visible.Line(b.Name), visible.Line(b.Ref), Commits(b.Ahead))
	args, kind := logArgs(oneline)
	args = append(args, b.Tip)
	if head, err := r.Repo.Head(ctx, r.Git); err == nil {
		args = append(args, "--not", head)
	}
	return r.streamView(ctx, out, errOut, view, kind, append(args, "--")...)
}

// FindSideBranch returns the side branch named name (the --branch flag).
func FindSideBranch(bs []SideBranch, name string) (SideBranch, bool) {
	for _, b := range bs {
		if b.Name == name {
			return b, true
		}
	}
	return SideBranch{}, false
}

// recreateSideBranches creates, in a clone being built (before any
// sandbox has seen it), the branches the host keeps for the agent, so
// that the ref sync (which mirrors deletions) does not drop them when the
// clone was rebuilt, after reset-branch or a lost clone. One update-ref
// each: a name the clone cannot hold is reported and skipped, not fatal.
func recreateSideBranches(ctx context.Context, g *hostgit.Git, repo *HostRepo, m RefMap, dir string, notice func(string, ...any)) {
	bs, err := ListSideBranches(ctx, g, repo, m)
	if err != nil {
		notice("side branches not recreated in the agent clone: %v", err)
		return
	}
	for _, b := range bs {
		if ValidBranch(b.Name) != nil || b.Name == m.AgentBranch() {
			continue
		}
		if err := g.Run(ctx, dir, "update-ref", "-m", "lazaret: kept side branch", "refs/heads/"+b.Name, b.Tip, ""); err != nil {
			notice("side branch %s not recreated in the agent clone (kept on the host as %s): %v", visible.Line(b.Name), visible.Line(b.Ref), err)
		}
	}
}
