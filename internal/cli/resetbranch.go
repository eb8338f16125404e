package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/gitsentry"
)

func newResetBranchCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "reset-branch [PROFILE]",
		Short: "Start the agent over from your current commit (the old tip is kept)",
		Long: `Move lazaret/agent-<profile> to your current HEAD and discard the agent's clone, so
the next sandbox start begins from your current commit. The old tip is kept as
refs/lazaret/<profile>/old/<timestamp>. Refuses while the sandbox runs.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: g.completeProfiles,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runResetBranch(cmd.Context(), g, firstArg(args))
		},
	}
}

func runResetBranch(ctx context.Context, g *globalOptions, profile string) error {
	t, err := g.openReview(ctx, profile)
	if err != nil {
		return err
	}
	res, err := gitsentry.ResetBranch(ctx, t.review.Git, t.podman, t.review.Repo, t.anchor, time.Now())
	if err != nil {
		return err
	}
	if res.KeptAs != "" {
		fmt.Fprintf(g.io.Out, "old tip %s kept as %s\n", short(res.OldTip), res.KeptAs)
	}
	fmt.Fprintf(g.io.Out, "%s now starts at %s\n", t.review.Map.AgentBranch(), short(res.NewTip))
	return nil
}
