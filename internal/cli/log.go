package cli

import (
	"context"
	"fmt"

	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/spf13/cobra"
)

type logOptions struct {
	oneline bool
	all     bool   // the side branches too
	branch  string // one side branch only
}

func newLogCmd(g *globalOptions) *cobra.Command {
	o := &logOptions{}
	cmd := &cobra.Command{
		Use:   "log [PROFILE]",
		Short: "List the agent's commits that your HEAD does not have",
		Long: `List the commits of lazaret/agent-<profile> that your HEAD does not have. The
agent's other branches are kept on the host as refs/lazaret/<profile>/heads/*;
without --all they are only named (on stderr). --all lists each one's commits
not in HEAD after the agent branch's; --branch NAME lists one of them alone.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: g.completeProfiles,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLog(cmd.Context(), g, o, firstArg(args))
		},
	}
	cmd.Flags().BoolVar(&o.oneline, "oneline", false, "one line per commit")
	cmd.Flags().BoolVar(&o.all, "all", false, "the agent's side branches too")
	cmd.Flags().StringVar(&o.branch, "branch", "", "only the agent's side branch `NAME`")
	cmd.MarkFlagsMutuallyExclusive("all", "branch")
	return cmd
}

func runLog(ctx context.Context, g *globalOptions, o *logOptions, profile string) error {
	t, err := g.openReview(ctx, profile)
	if err != nil {
		return err
	}
	side, err := t.review.SideBranches(ctx)
	if err != nil {
		return err
	}
	// Commit messages, author and ref names are the agent's: see
	// terminalOut.
	view := g.terminalOut()
	if o.branch != "" {
		b, ok := gitrepo.FindSideBranch(side, o.branch)
		if !ok {
			return withHint(fmt.Errorf("--branch %s: no such side branch of the agent", field(o.branch)), exitUsage,
				"lazaret status lists the agent's side branches")
		}
		return t.review.LogSide(ctx, g.io.Out, g.io.ErrOut, b, o.oneline, view)
	}
	if err := t.review.Log(ctx, g.io.Out, g.io.ErrOut, o.oneline, view); err != nil {
		return err
	}
	if !o.all {
		if len(side) > 0 {
			fmt.Fprintf(g.io.ErrOut, "lazaret: side branches: %s; see lazaret log --all\n", gitrepo.SideSummary(side))
		}
		return nil
	}
	for _, b := range side {
		if err := t.review.LogSide(ctx, g.io.Out, g.io.ErrOut, b, o.oneline, view); err != nil {
			return err
		}
	}
	return nil
}
