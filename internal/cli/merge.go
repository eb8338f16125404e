package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/lazaret-dev/lazaret/internal/cli/review"
	"github.com/spf13/cobra"
)

type mergeOptions struct {
	squash        bool
	allowSymlinks bool
}

func newMergeCmd(g *globalOptions) *cobra.Command {
	o := &mergeOptions{}
	cmd := &cobra.Command{
		Use:   "merge [PROFILE]",
		Short: "Merge the agent branch into your current branch",
		Long: `Merge lazaret/agent-<profile> into the branch checked out in the current directory,
with git on the host and hooks disabled (the merged tree is the agent's). Refuses
when your working tree has uncommitted changes; on a conflict the merge is aborted
and the repository is left exactly as it was. Refuses when the branch adds a
symlink that leads out of the repository (absolute, above the top, into .git),
unless --allow-external-symlinks; lists new executables and changed files your
tools run unasked.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: g.completeProfiles,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMerge(cmd.Context(), g, o, firstArg(args))
		},
	}
	cmd.Flags().BoolVar(&o.squash, "squash", false, "make one commit of the agent's changes")
	cmd.Flags().BoolVar(&o.allowSymlinks, "allow-external-symlinks", false, "merge even if the branch adds symlinks that lead out of the repository")
	return cmd
}

func runMerge(ctx context.Context, g *globalOptions, o *mergeOptions, profile string) error {
	t, err := g.openReview(ctx, profile)
	if err != nil {
		return err
	}
	t.review.AllowExternalSymlinks = o.allowSymlinks
	res, err := t.review.Merge(ctx, o.squash)
	var ext *review.ExternalSymlinkError
	if errors.As(err, &ext) {
		writeFlags(g.io.ErrOut, "refused: the merge would create", ext.Links)
		return withHint(err, exitSecurity, "review these links; merge anyway with --allow-external-symlinks")
	}
	if err != nil {
		return err
	}
	writeFlags(g.io.ErrOut, "this merge planted", res.Flags)
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
