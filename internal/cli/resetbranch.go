package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/review"
	"github.com/spf13/cobra"
)

func newResetBranchCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "reset-branch [PROFILE]",
		Short: "Start the agent over from your current commit (the old tip is kept)",
		Long: `Move lazaret/agent-<profile> to your current HEAD and discard the agent's clone, so
the next sandbox start begins from your current commit. The old tip is kept as
refs/lazaret/<profile>/old/<timestamp>; the agent's side branches
(refs/lazaret/<profile>/heads/*) are kept and come back as branches in the new
clone. Refuses while the sandbox runs.`,
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
	// No sandbox may start while the clone is removed.
	var res *review.ResetResult
	err = g.domainClient(t.anchor).maintain(ctx, true, func() error {
		var err error
		res, err = review.ResetBranch(ctx, t.review.Git, t.podman, t.review.Repo, t.anchor, time.Now())
		return err
	})
	if errors.Is(err, errCoordinatorLive) {
		return fmt.Errorf("%s: %w (%w)", t.anchor.Container(), review.ErrSandboxRunning, err)
	}
	if err != nil {
		return err
	}
	if res.KeptAs != "" {
		fmt.Fprintf(g.io.Out, "old tip %s kept as %s\n", short(res.OldTip), res.KeptAs)
	}
	for _, b := range res.Side {
		fmt.Fprintf(g.io.Out, "side branch %s kept as %s (%s)\n", field(b.Name), field(b.Ref), short(b.Tip))
	}
	fmt.Fprintf(g.io.Out, "%s now starts at %s\n", t.review.Map.AgentBranch(), short(res.NewTip))
	if len(res.Side) > 0 {
		fmt.Fprintln(g.io.Out, "the next start recreates the side branches in the agent's new clone")
	}
	return nil
}
