package cli

import (
	"context"

	"github.com/spf13/cobra"
)

type logOptions struct {
	oneline bool
}

func newLogCmd(g *globalOptions) *cobra.Command {
	o := &logOptions{}
	cmd := &cobra.Command{
		Use:               "log [PROFILE]",
		Short:             "List the agent's commits that your HEAD does not have",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: g.completeProfiles,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLog(cmd.Context(), g, o, firstArg(args))
		},
	}
	cmd.Flags().BoolVar(&o.oneline, "oneline", false, "one line per commit")
	return cmd
}

func runLog(ctx context.Context, g *globalOptions, o *logOptions, profile string) error {
	t, err := g.openReview(ctx, profile)
	if err != nil {
		return err
	}
	// Commit messages, author and ref names are the agent's: see
	// terminalOut.
	return t.review.Log(ctx, g.io.Out, g.io.ErrOut, o.oneline, g.terminalOut())
}
