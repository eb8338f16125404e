package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/lazaret-dev/lazaret/internal/cli/review"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// chooseWorkspace returns the canonical Agent Workspace
// (clicore.Workspace, lazaret-kube's too). An explicit directory (the
// argument, set by the CLI for its coordinator, or --workspace) is taken
// as is.
func (g *globalOptions) chooseWorkspace(cfg *config.Config, p *config.Profile, explicit string) (string, error) {
	if explicit == "" {
		explicit = g.workspace
	}
	return clicore.Workspace(cfg, p, explicit, g.log)
}

// startAnnouncer is called by a session before it connects; the function
// it returns is called once the sandbox runs and prints what a start should
// tell, if this session started the sandbox (there was no coordinator
// socket): the package database lazaret persists with /usr, unlisted
// (config.Profile.PackageStateNote); in direct mode, that the agent
// writes the host's files; in
// branch mode, when the agent branch lacks commits of the host's HEAD, how
// far behind it is (counted beside the start, so it costs the start
// nothing). Said once per start, only when the agent really runs, and
// never by a session joining a running sandbox (whose stderr stays the
// command's own).
func (g *globalOptions) startAnnouncer(ctx context.Context, p *config.Profile, a *domain.Anchor) func() {
	if _, err := os.Lstat(a.ControlSocket()); err == nil {
		return func() {}
	}
	git := g.gitAnnouncer(ctx, p, a)
	return func() {
		if n := p.PackageStateNote(); n != "" {
			fmt.Fprintf(g.io.ErrOut, "lazaret: profile %s: %s\n", p.Name, n)
		}
		git()
	}
}

// gitAnnouncer is startAnnouncer's git part.
func (g *globalOptions) gitAnnouncer(ctx context.Context, p *config.Profile, a *domain.Anchor) func() {
	mode, err := gitrepo.ResolveMode(p.GitMode, a.Workspace)
	switch {
	case err != nil:
		return func() {}
	case mode == gitrepo.ModeDirect:
		return func() { fmt.Fprintln(g.io.ErrOut, directModeNotice(a.Workspace)) }
	}
	lag := make(chan review.Lag, 1)
	go func() {
		l, _ := review.AgentBranchLag(ctx, g.hostGit(), a, p.GitMode)
		lag <- l
	}()
	return func() {
		select {
		case l := <-lag:
			if n := agentLagNotice(l, a.Profile); n != "" {
				fmt.Fprintln(g.io.ErrOut, n)
			}
		case <-ctx.Done():
		}
	}
}

// agentLagNotice is the line a branch-mode start prints when the host's
// HEAD has commits the agent branch lacks (the user merged its work and
// went on, say): the agent goes on from its own tip, not from HEAD. ""
// when it is not behind.
func agentLagNotice(l review.Lag, profile string) string {
	if l.Behind == 0 {
		return ""
	}
	agent := gitrepo.RefMap{Profile: profile}.AgentBranch()
	head := "your HEAD"
	if l.HeadBranch != "" {
		head = "your " + visible.Line(l.HeadBranch)
	}
	if l.Ahead > 0 {
		return fmt.Sprintf("lazaret: %s is %s behind %s and %s ahead: the agent goes on from its own tip (review with %s)",
			agent, gitrepo.Commits(l.Behind), head, gitrepo.Commits(l.Ahead), verbLine("log", profile))
	}
	return fmt.Sprintf("lazaret: %s is %s behind %s: the agent goes on from its older tip (%s starts it again from HEAD, keeping the old tip)",
		agent, gitrepo.Commits(l.Behind), head, verbLine("reset-branch", profile))
}

// directModeNotice is the one line a sandbox start prints in direct mode:
// the agent's writes go straight to the user's files, with no branch to
// review first.
func directModeNotice(ws string) string {
	return fmt.Sprintf("lazaret: direct mode: the agent writes %s on the host itself (no agent branch to review; a git repository's top level gives branch mode)", field(ws))
}
