package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/cli/connect"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

type eventsOptions struct {
	json  bool
	since uint64
}

func newEventsCmd(g *globalOptions) *cobra.Command {
	o := &eventsOptions{}
	cmd := &cobra.Command{
		Use:   "events [PROFILE]",
		Short: "Stream the events of the sandbox of this directory until it stops",
		Long: "Stream the events of the sandbox of PROFILE in this directory (approval.pending, approval.decided,\n" +
			"net.denied, session.*, agent.attention, sandbox.stopped) until it stops (exit 0) or Ctrl-C;\n" +
			"--json prints one versioned JSON object a line (docs/APPROVALS.md).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runEvents(cmd.Context(), g, o, firstArg(args)) },
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object a line")
	cmd.Flags().Uint64Var(&o.since, "since", 0, "start after this sequence number (0: every event the coordinator still keeps)")
	return cmd
}

func runEvents(ctx context.Context, g *globalOptions, o *eventsOptions, profile string) error {
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	_, a, err := g.resolveDomain(cfg, profile, "")
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	c, err := g.domainClient(a).dial(dctx)
	if errors.Is(err, connect.ErrNotRunning) {
		return withHint(fmt.Errorf("no sandbox of profile %s runs in %s", field(a.Profile), field(a.Workspace)), exitFailure,
			"start one with `lazaret shell` or `lazaret exec`, then run lazaret events")
	}
	if err != nil {
		return err
	}
	defer c.Close()
	p := &clicore.EventPrinter{W: g.io.Out, JSON: o.json}
	if err := c.SubscribeEvents(dctx, o.since, p.Print); err != nil {
		if errors.Is(err, ctl.ErrUnknownType) {
			return withHint(errors.New("the sandbox's coordinator is older than this lazaret and has no event stream"), exitFailure, "restart the sandbox")
		}
		return fmt.Errorf("events: %w", err)
	}
	select {
	case <-ctx.Done():
		return nil // Ctrl-C
	case <-c.Done():
	}
	if p.Ended() {
		return nil
	}
	return errors.New("events: the event stream ended before the sandbox stopped (this reader fell too far behind, or the coordinator went away)")
}
