package approvals

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// Handlers are the control socket's approvals requests, for
// ctlserver.Server.Handle. The socket admits only its process's own
// user (SO_PEERCRED), so these answer nobody else; an answer names its
// CLI's pid and uid.
func (h *Hub) Handlers(profile, workspace string) map[string]ctlserver.HandlerFunc {
	return map[string]ctlserver.HandlerFunc{
		ctl.TypeApprovalsList: func(context.Context, *ctlserver.Request) (any, error) {
			return &ctl.ApprovalsList{Profile: profile, Workspace: workspace, Pending: h.List()}, nil
		},
		ctl.TypeApprovalsShow: func(_ context.Context, r *ctlserver.Request) (any, error) {
			var req ctl.ApprovalsShow
			if err := r.Decode(&req); err != nil {
				return nil, err
			}
			p, err := h.Get(req.ID)
			if err != nil {
				return nil, err
			}
			return &p, nil
		},
		ctl.TypeApprovalsAnswer: func(_ context.Context, r *ctlserver.Request) (any, error) {
			var req ctl.ApprovalAnswer
			if err := r.Decode(&req); err != nil {
				return nil, err
			}
			d, err := h.Answer(req, CLIFrom(r.PeerPID, r.PeerUID))
			if err != nil {
				return nil, err
			}
			return &ctl.ApprovalAnswered{Decision: d.Action}, nil
		},
	}
}
