package proposals

import (
	"context"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/coordinator/approvals"
	"github.com/lazaret-dev/lazaret/internal/coordinator/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// Handlers are the control socket's proposals requests, for
// ctlserver.Server.Handle. The socket admits only the coordinator's own
// user (SO_PEERCRED); an answer names its CLI's pid and uid. A proposal
// may be answered from any terminal of that user whatever [escalation]
// answer_from says: it runs nothing, and its human is asked for a rule,
// not by a session's command.
func (m *Manager) Handlers() map[string]ctlserver.HandlerFunc {
	return map[string]ctlserver.HandlerFunc{
		ctl.TypeProposalsList: func(context.Context, *ctlserver.Request) (any, error) {
			return &ctl.ProposalsList{Profile: m.o.Profile.Name, Workspace: m.o.Workspace, Mode: m.o.Mode, Proposals: m.List()}, nil
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
