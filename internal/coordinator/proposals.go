package coordinator

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/coordinator/escalation"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/engine/proposal"
)

// withProposals gives the escalation component the agent's policy
// proposals (docs/POLICY.md): a manager over the approvals hub, netd's
// control socket and the component's live auto_approve, whose
// `lazaret proposals` requests the control socket serves. Without a hub
// (tests) the component takes none.
func withProposals(d *Deps, esc *escalation.Component) *escalation.Component {
	if d.Approvals == nil || d.Server == nil {
		return esc
	}
	m := proposal.New(context.Background(), proposal.Options{Mode: d.Config.Policy.Proposals, Config: d.Config, Profile: d.Profile,
		Workspace: d.Anchor.Workspace, Registry: proposal.Hub(d.Approvals), Netd: sidecar.Client(d.Anchor), Rules: esc.Policy(), Audit: d.Audit, Log: d.Log})
	for typ, h := range proposal.Handlers(m) {
		d.Server.Handle(typ, h)
	}
	return esc.WithProposals(m)
}
