package ctl

import (
	"context"
	"time"
)

// Messages of the policy proposal loop (docs/POLICY.md), client →
// coordinator: `lazaret proposals` lists, shows, approves and denies the
// rules the agent proposed with `lazaret-escalate --propose`. A pending
// proposal is also one of the sandbox's pending requests (Kind
// RequestProposal), shown on the proposing session's terminal.
const (
	// TypeProposalsList: no payload, answered by ProposalsList.
	TypeProposalsList = "proposals.list"
	// TypeProposalsShow: ProposalsShow, answered by Proposal.
	TypeProposalsShow = "proposals.show"
	// TypeProposalsAnswer: ProposalAnswer, answered by ProposalAnswered.
	TypeProposalsAnswer = "proposals.answer"
)

// RequestProposal is a PendingRequest's (and an Event's) kind for a
// proposal.
const RequestProposal = "proposal"

// Proposal statuses.
const (
	ProposalPending  = "pending"
	ProposalApproved = "approved"
	ProposalDenied   = "denied"
)

// ProposalFinding is one of the checker's findings.
type ProposalFinding struct {
	Code     string `json:"code"`
	Severity string `json:"severity"` // info, review, refuse
	Message  string `json:"message"`
}

// Proposal is one proposed rule as the checker normalised it. Every
// string the sandbox chose (Target, Why) is escaped for display
// (internal/visible); Rule and the findings' messages are the checker's
// ASCII forms.
type Proposal struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	Session string    `json:"session,omitempty"`
	// Kind is "net" (an allow_domains or allow_egress entry) or "exec"
	// (an auto_approve entry).
	Kind string `json:"kind"`
	// Key is the configuration key the rule belongs in (allow_domains,
	// allow_egress, auto_approve).
	Key            string            `json:"key"`
	Rule           string            `json:"rule"`
	Port           int               `json:"port,omitempty"`
	Target         string            `json:"target"`
	Why            string            `json:"why,omitempty"`
	CheckerVersion int               `json:"checker_version"`
	Findings       []ProposalFinding `json:"findings"`
	// Hash binds an answer to this exact candidate: the SHA-256 of kind,
	// rule, port, checker version and findings.
	Hash   string `json:"hash"`
	Status string `json:"status"`
	// Decision, From and Reason say how a decided proposal ended.
	From   string `json:"from,omitempty"`
	Reason string `json:"reason,omitempty"`
	// PolicyHash is the SHA-256 of the active policy after an approval.
	PolicyHash string `json:"policy_hash,omitempty"`
}

// ProposalsList answers TypeProposalsList: the pending proposals and the
// recently decided ones, oldest first.
type ProposalsList struct {
	Profile   string     `json:"profile"`
	Workspace string     `json:"workspace"`
	Mode      string     `json:"mode"`
	Proposals []Proposal `json:"proposals"`
}

// ProposalsShow asks for one proposal.
type ProposalsShow struct {
	ID string `json:"id"`
}

// ProposalAnswer decides one pending proposal. An approval must name the
// candidate's Hash; Reason goes into the audit trail.
type ProposalAnswer struct {
	ID     string `json:"id"`
	Hash   string `json:"hash,omitempty"`
	Action string `json:"action"` // ActionApprove or ActionDeny
	Reason string `json:"reason,omitempty"`
}

// ProposalAnswered is the decided proposal (its Status, PolicyHash).
type ProposalAnswered struct {
	Proposal Proposal `json:"proposal"`
}

// ProposalsList lists the sandbox's proposals.
func (c *Client) ProposalsList(ctx context.Context) (ProposalsList, error) {
	var l ProposalsList
	err := c.call(ctx, TypeProposalsList, nil, &l)
	return l, err
}

// ProposalsShow returns one proposal (ErrUnknownRequest).
func (c *Client) ProposalsShow(ctx context.Context, id string) (Proposal, error) {
	var p Proposal
	err := c.call(ctx, TypeProposalsShow, ProposalsShow{ID: id}, &p)
	return p, err
}

// ProposalAnswer decides one proposal; a refusal is ErrUnknownRequest,
// ErrStaleRequest or ErrAnsweredFirst with a message saying why.
func (c *Client) ProposalAnswer(ctx context.Context, a ProposalAnswer) (ProposalAnswered, error) {
	var r ProposalAnswered
	err := c.call(ctx, TypeProposalsAnswer, a, &r)
	return r, err
}
