package kubecli

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// sessionsProposals is the proposals of every running cluster session of
// one target on this host (clicore.ProposalsClient): each session's
// lazaret-kube process holds its own, served on its control socket
// (domain.KubeSessionSocket). The listing is theirs together; show and
// answer go to the session that holds the id.
type sessionsProposals struct {
	sessions []*ctl.Client
}

// dialSessions connects to the control sockets of the running sessions
// of t on this machine; none is an error saying where proposals live.
func (g *globals) dialSessions(ctx context.Context, t *target) (*sessionsProposals, error) {
	dctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	clients, err := g.sessionSockets(dctx, t)
	if err != nil {
		return nil, err
	}
	if len(clients) == 0 {
		return nil, fmt.Errorf("no cluster session of profile %s runs for %s on this machine: proposals wait in a running session's lazaret-kube process", visible.Line(t.profile.Name), visible.Line(t.workspace))
	}
	return &sessionsProposals{sessions: clients}, nil
}

var _ clicore.ProposalsClient = (*sessionsProposals)(nil)

// ProposalsList implements clicore.ProposalsClient: every session's, a
// session without proposals (Host Escalation off) left out.
func (s *sessionsProposals) ProposalsList(ctx context.Context) (ctl.ProposalsList, error) {
	var out ctl.ProposalsList
	var errs []error
	served := false
	for _, c := range s.sessions {
		l, err := c.ProposalsList(ctx)
		if errors.Is(err, ctl.ErrUnknownType) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		served = true
		out.Profile, out.Workspace, out.Mode = l.Profile, l.Workspace, l.Mode
		out.Proposals = append(out.Proposals, l.Proposals...)
	}
	if !served {
		if len(errs) == 0 {
			errs = append(errs, errors.New("no running session of this sandbox takes proposals (Host Escalation is off)"))
		}
		return out, errors.Join(errs...)
	}
	sort.SliceStable(out.Proposals, func(i, j int) bool { return out.Proposals[i].Created.Before(out.Proposals[j].Created) })
	return out, nil
}

// holder is the session holding proposal id, with it.
func (s *sessionsProposals) holder(ctx context.Context, id string) (*ctl.Client, ctl.Proposal, error) {
	var err error = ctl.Errorf(ctl.ErrUnknownRequest.Code, "no proposal %q in this sandbox's sessions", id)
	for _, c := range s.sessions {
		p, e := c.ProposalsShow(ctx, id)
		if e == nil {
			return c, p, nil
		}
		if !errors.Is(e, ctl.ErrUnknownRequest) && !errors.Is(e, ctl.ErrUnknownType) {
			err = e
		}
	}
	return nil, ctl.Proposal{}, err
}

// ProposalsShow implements clicore.ProposalsClient.
func (s *sessionsProposals) ProposalsShow(ctx context.Context, id string) (ctl.Proposal, error) {
	_, p, err := s.holder(ctx, id)
	return p, err
}

// ProposalAnswer implements clicore.ProposalsClient.
func (s *sessionsProposals) ProposalAnswer(ctx context.Context, a ctl.ProposalAnswer) (ctl.ProposalAnswered, error) {
	c, _, err := s.holder(ctx, a.ID)
	if err != nil {
		return ctl.ProposalAnswered{}, err
	}
	return c.ProposalAnswer(ctx, a)
}

// Close implements clicore.ProposalsClient.
func (s *sessionsProposals) Close() error {
	for _, c := range s.sessions {
		_ = c.Close()
	}
	return nil
}
