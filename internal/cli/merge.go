package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

type mergeOptions struct {
	squash bool
}

func newMergeCmd(g *globalOptions) *cobra.Command {
	o := &mergeOptions{}
	cmd := &cobra.Command{
		Use:   "merge [PROFILE]",
		Short: "Merge the agent branch into your current branch",
		Long: `Merge lazaret/agent-<profile> into the branch checked out in the current directory,
with git on the host and hooks disabled (the merged tree is the agent's). Refuses
when your working tree has uncommitted changes; on a conflict the merge is aborted
and the repository is left exactly as it was.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: g.completeProfiles,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMerge(cmd.Context(), g, o, firstArg(args))
		},
	}
	cmd.Flags().BoolVar(&o.squash, "squash", false, "make one commit of the agent's changes")
	return cmd
}

func runMerge(ctx context.Context, g *globalOptions, o *mergeOptions, profile string) error {
	t, err := g.openReview(ctx, profile)
	if err != nil {
		return err
	}
	res, err := t.review.Merge(ctx, o.squash)
	if err != nil {
		return err
	}
	if res.UpToDate {
		fmt.Fprintf(g.io.Out, "%s: already up to date with %s\n", field(res.Branch), t.review.Map.AgentBranch())
		return nil
	}
	fmt.Fprintf(g.io.Out, "merged %s into %s (%s..%s)\n", t.review.Map.AgentBranch(), field(res.Branch), short(res.Before), short(res.After))
	return nil
}

func short(oid string) string {
	if len(oid) > 12 {
		return oid[:12]
	}
	return oid
}
