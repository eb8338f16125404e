package escalation

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
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

// Show asks the session's own terminal only: a proposal is registered
// with the approvals hub by its manager, which decides it from whichever
// answer comes first.
func (p ctlPrompter) Show(ctx context.Context, r escprompt.PromptRequest) (escprompt.Answer, error) {
	return p.terminalOnly(ctx, r)
}
