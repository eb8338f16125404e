package proposal

// A sandbox's approvals hub as the proposals' Registry, and `lazaret
// proposals`' control requests: the coordinator's (one hub per sandbox)
// and a lazaret-kube session's (one hub per session, on its own control
// socket) alike. A proposal waits in the hub as one of its pending
// requests (kind "proposal").

import (
	"context"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// Hub is the approvals hub as a Registry: every pending
// proposal is one of the sandbox's pending requests.
func Hub(h *approvals.Hub) Registry { return hubRegistry{h} }

type hubRegistry struct{ h *approvals.Hub }

type hubPending struct{ p *approvals.Pending }

func (r hubRegistry) Add(req ctl.PendingRequest) Pending {
	req.Kind = ctl.RequestProposal
	return hubPending{r.h.Add(req)}
}

func (r hubRegistry) Decide(p Pending, action, from string) bool {
	hp, ok := p.(hubPending)
	if !ok {
		return false
	}
	return r.h.Decide(hp.p, approvals.Decision{Action: action, From: from, Remote: !strings.HasPrefix(from, "terminal of ")})
}

func (p hubPending) PendingID() string     { return p.p.ID }
func (p hubPending) Done() <-chan struct{} { return p.p.Done() }
func (p hubPending) Outcome() (action, from string) {
	d := p.p.Decision()
	return d.Action, d.From
}

// Handlers are the control socket's proposals requests, for
// ctlserver.Server.Handle. The socket admits only the coordinator's own
// user (SO_PEERCRED); an answer names its CLI's pid and uid. A proposal
// may be answered from any terminal of that user whatever [escalation]
// answer_from says: it runs nothing, and its human is asked for a rule,
// not by a session's command.
func Handlers(m *Manager) map[string]ctlserver.HandlerFunc {
	return map[string]ctlserver.HandlerFunc{
		ctl.TypeProposalsList: func(context.Context, *ctlserver.Request) (any, error) {
			profile, workspace, mode := m.Target()
			return &ctl.ProposalsList{Profile: profile, Workspace: workspace, Mode: mode, Proposals: m.List()}, nil
		},
		ctl.TypeProposalsShow: func(_ context.Context, r *ctlserver.Request) (any, error) {
			var req ctl.ProposalsShow
			if err := r.Decode(&req); err != nil {
				return nil, err
			}
			p, err := m.Get(req.ID)
			if err != nil {
				return nil, err
			}
			return &p, nil
		},
		ctl.TypeProposalsAnswer: func(_ context.Context, r *ctlserver.Request) (any, error) {
			var req ctl.ProposalAnswer
			if err := r.Decode(&req); err != nil {
				return nil, err
			}
			p, err := m.Answer(req, strings.Replace(approvals.CLIFrom(r.PeerPID, r.PeerUID), "approvals", "proposals", 1))
			if err != nil {
				return nil, err
			}
			return &ctl.ProposalAnswered{Proposal: p}, nil
		},
	}
}
