package kubecli

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/proposal"
)

// sessionProposals serves the agent's policy proposals of one cluster
// session (docs/POLICY.md, "Backends"). They wait in the session's
// approvals hub, shown on its terminal and answerable with `lazaret
// --backend kubernetes proposals` (and `approvals`) on the session's
// control socket, whose proposals requests this registers; without a hub
// (its socket could not be made) they wait in this process and only the
// terminal decides them. An approved auto_approve entry joins this
// session's live policy until it ends, an approved name the pod's netd
// allowlist at once (an exec into netd's container, podNetd) until the
// pod ends; an address or CIDR is refused (podNetLimit): the IP level is
// the pod's NetworkPolicy, its template's.
func (g *globals) sessionProposals(ctx context.Context, cfg *config.Config, t *target, policy *eschost.Policy, c *kube.Client, pod string, hub *sessionHub) eschost.ProposalHandler {
	o := proposal.Options{Mode: cfg.Policy.Proposals, Config: cfg, Profile: t.profile, Workspace: t.workspace,
		Registry: proposal.NewLocal(), Rules: policy, Netd: &podNetd{c: c, pod: pod}, NetLimit: podNetLimit,
		Audit: g.auditTo(cfg, t), Log: g.log, RequireTerminal: true}
	if hub != nil {
		o.Registry, o.RequireTerminal = proposal.Hub(hub.approvals), false
	}
	m := proposal.New(ctx, o)
	if hub != nil {
		for typ, h := range proposal.Handlers(m) {
			hub.srv.Handle(typ, h)
		}
	}
	return m
}
