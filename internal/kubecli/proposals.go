package kubecli

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/proposal"
)

// sessionProposals serves the agent's policy proposals of one cluster
// session (docs/POLICY.md, "Backends"): they wait in this process and
// only the session's terminal decides them (there is no coordinator for
// `lazaret proposals` to reach); an approved auto_approve entry joins this
// session's live policy until it ends. A network rule is refused: the
// pod's netd takes its policy from its ConfigMap and the IP-level egress
// is the pod's NetworkPolicy, neither of which this process changes while
// the pod runs.
func (g *globals) sessionProposals(ctx context.Context, cfg *config.Config, t *target, policy *eschost.Policy) eschost.ProposalHandler {
	return proposal.New(ctx, proposal.Options{Mode: cfg.Policy.Proposals, Config: cfg, Profile: t.profile, Workspace: t.workspace,
		Registry: proposal.NewLocal(), Rules: policy, Audit: g.auditTo(cfg, t), Log: g.log, RequireTerminal: true})
}
