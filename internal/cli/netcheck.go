package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/engine/policycheck"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// newNetCheckCmd is `lazaret net check [PROFILE] HOST[:PORT]`: exit 0
// when the sandbox's policy lets it reach the destination, 1 when not.
// It reads the running sandbox's live policy (with what `net allow` and
// answered prompts added) or, when none runs, the configuration's; it
// never resolves the name, asks anyone or holds a lookup.
func newNetCheckCmd(g *globalOptions, o *netOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check [PROFILE] HOST[:PORT]",
		Short: "Say whether the sandbox's egress policy allows a host or address (exit 0 allowed, 1 denied)",
		Example: `  lazaret net check registry.npmjs.org
  lazaret net check dev 140.82.112.4:443 && echo reachable`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: g.completeProfileArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.netProfile(cmd, o, args, len(args)-1, " HOST[:PORT]"); err != nil {
				return err
			}
			return runNetCheck(cmd.Context(), g, o, args[len(args)-1])
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runNetCheck(ctx context.Context, g *globalOptions, o *netOptions, target string) error {
	p, a, cl, err := g.netClient(o)
	if err != nil {
		return err
	}
	source := "the running sandbox's policy"
	var pol netpolicy.Policy
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	st, err := cl.Status(ctx)
	switch {
	case err == nil:
		pol = st.Policy
	case errors.Is(err, netdapi.ErrUnavailable) && !g.domainClient(a).alive(ctx):
		source = "the configuration (no sandbox runs)"
		if pol, err = netpolicy.FromConfig(p.AllowEgress, p.AllowDomains); err != nil {
			return err
		}
	default:
		return netUnavailable(ctx, g, err, a)
	}
	d, err := policycheck.Decide(pol, target, time.Now())
	if err != nil {
		return usageError{fmt.Errorf("net check: %w", err)}
	}
	return clicore.PrintNetCheck(g.io.Out, clicore.NetCheckResult{Decision: d, Source: source}, a.Profile, o.json)
}
