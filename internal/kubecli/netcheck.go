package kubecli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/engine/policycheck"
)

// newNetCmd is lazaret-kube's `net`: `check` only (the local CLI's
// allow, status and reload act on a local sidecar; a cluster sandbox's
// names change through an approved proposal, docs/POLICY.md).
func newNetCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "net", Short: "Check the egress policy of this directory's cluster sandbox"}
	var asJSON bool
	check := &cobra.Command{
		Use:   "check [PROFILE] HOST[:PORT]",
		Short: "Say whether the cluster sandbox's egress policy allows a host or address (exit 0 allowed, 1 denied)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			profile := ""
			if len(args) == 2 {
				profile = args[0]
			}
			return g.runNetCheck(cmd.Context(), profile, args[len(args)-1], asJSON)
		},
	}
	check.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(check)
	return cmd
}

// kubeNameNote is what else limits a name on Kubernetes: the pod's
// NetworkPolicy (its template's) opens only the allow_egress networks and
// the resolvers, whatever a name resolves to.
const kubeNameNote = "on Kubernetes its connections are limited by the pod's NetworkPolicy too: only addresses inside allow_egress are reached"

// runNetCheck decides from the running pod's netd (its live allowlist,
// with what approved proposals added) for names, else from the
// configuration; addresses are the NetworkPolicy's, which is the
// template's (the configuration's allow_egress). It never resolves or
// holds anything.
func (g *globals) runNetCheck(ctx context.Context, profile, target string, asJSON bool) error {
	_, c, t, err := g.clientFor(profile)
	if err != nil {
		return err
	}
	pol, err := netpolicy.FromConfig(t.profile.AllowEgress, t.profile.AllowDomains)
	if err != nil {
		return err
	}
	source := "the configuration (no cluster sandbox runs)"
	if claim, err := c.Claim(ctx, kubespec.ClaimName(t.hash)); err == nil {
		if r, err := g.podOf(ctx, c, claim); err == nil {
			if st, err := (&podNetd{c: c, pod: r.pod}).Status(ctx); err == nil {
				pol.AllowDomains = st.Policy.AllowDomains
				source = "the cluster sandbox's netd for names, its NetworkPolicy for addresses"
			}
		}
	}
	d, err := policycheck.Decide(pol, target, g.now())
	if err != nil {
		return clicore.UsageError{Err: fmt.Errorf("net check: %w", err)}
	}
	res := clicore.NetCheckResult{Decision: d, Source: source}
	if d.Allowed && isName(d.Target) {
		res.Note = kubeNameNote
	}
	return clicore.PrintNetCheck(g.io.Out, res, t.profile.Name, asJSON)
}
