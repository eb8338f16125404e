package escalation

import (
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
)

// Policy is the escalation server's live auto-approve engine: an
// approved exec proposal joins it (internal/engine/proposal).
func (c *Component) Policy() *eschost.Policy { return c.policy }

// WithProposals hands the agent's policy proposals to h. Call it before
// Prepare.
func (c *Component) WithProposals(h eschost.ProposalHandler) *Component {
	c.o.Proposals = h
	return c
}
