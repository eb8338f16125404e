package kubecli

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/proposal"
)

// sessionProposals serves the agent's policy proposals of one cluster
// session (docs/POLICY.md, "Backends"): they wait in this process and
// only the session's terminal decides them; an approved auto_approve
// entry joins this session's live policy until it ends, an approved name
// joins the pod's netd allowlist at once (an exec into netd's container,
// podNetd) until the pod ends. An address or CIDR is refused
// (podNetLimit): the IP level is the pod's NetworkPolicy, its template's.
func (g *globals) sessionProposals(ctx context.Context, cfg *config.Config, t *target, policy *eschost.Policy, c *kube.Client, pod string) eschost.ProposalHandler {
	return proposal.New(ctx, proposal.Options{Mode: cfg.Policy.Proposals, Config: cfg, Profile: t.profile, Workspace: t.workspace,
		Registry: proposal.NewLocal(), Rules: policy, Netd: &podNetd{c: c, pod: pod}, NetLimit: podNetLimit,
		Audit: g.auditTo(cfg, t), Log: g.log, RequireTerminal: true})
}
