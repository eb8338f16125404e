package gitrepo

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
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
	out, err := g.ForEachRef(ctx, repo.Common(), strings.TrimSuffix(m.SideRefPrefix(), "/"))
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

// FindSideBranch returns the side branch named name (the --branch flag).
func FindSideBranch(bs []SideBranch, name string) (SideBranch, bool) {
	for _, b := range bs {
		if b.Name == name {
			return b, true
		}
	}
	return SideBranch{}, false
}
