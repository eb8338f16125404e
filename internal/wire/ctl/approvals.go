package ctl

import (
	"context"
	"time"
)

// Messages of pending approvals and the event stream (client →
// coordinator). Every pending prompt of a sandbox (an escalation or a
// denied DNS name) is a PendingRequest with an id; `lazaret approvals`
// lists, shows and answers them, `lazaret events` subscribes to the
// sandbox's events.
const (
	// TypeApprovalsList: no payload, answered by ApprovalsList.
	TypeApprovalsList = "approvals.list"
	// TypeApprovalsShow: ApprovalsShow, answered by PendingRequest.
	TypeApprovalsShow = "approvals.show"
	// TypeApprovalsAnswer: ApprovalAnswer, answered by ApprovalAnswered.
	TypeApprovalsAnswer = "approvals.answer"
	// TypeEventsSubscribe: EventsSubscribe, answered by an empty reply;
	// then the coordinator sends each Event as a TypeEvent request on
	// that connection, the next after the reply, until it closes (a
	// subscriber too far behind is dropped: the connection is closed).
	TypeEventsSubscribe = "events.subscribe"
	// TypeEvent is one Event (coordinator → client request, empty reply).
	TypeEvent = "events.event"
)

// Actions of ApprovalAnswer (and Decisions of an approval.decided Event,
// with DecisionExpired and DecisionWithdrawn).
const (
	ActionApprove     = "approve"
	ActionDeny        = "deny"
	DecisionExpired   = "expired"
	DecisionWithdrawn = "withdrawn"
)

// PendingRequest is one request awaiting an answer.
type PendingRequest struct {
	// ID is short and random (8 hex), unique in its coordinator.
	ID      string    `json:"id"`
	Kind    string    `json:"kind"` // RequestEscalation or RequestNetwork
	Created time.Time `json:"created"`
	// Session is the asking session's id (empty for a network prompt: a
	// lookup carries no session), SessionCommand its command.
	Session        string   `json:"session,omitempty"`
	SessionCommand []string `json:"session_command,omitempty"`
	// Detail is the request rendered as its prompt renders it, every
	// invisible character made visible (internal/visible): safe to print.
	Detail string `json:"detail"`
	// Summary is Detail on one line, for a list.
	Summary string `json:"summary"`
	// Hash is the SHA-256 (hex) of the exact request: an escalation's
	// canonical signed encoding, a network prompt's name. An answer names
	// it, so that it answers what its human saw.
	Hash string `json:"hash"`
	// AnswerFrom is the sandbox's [escalation] answer_from.
	AnswerFrom string `json:"answer_from"`
}

// ApprovalsList answers TypeApprovalsList.
type ApprovalsList struct {
	Profile   string           `json:"profile"`
	Workspace string           `json:"workspace"`
	Pending   []PendingRequest `json:"pending"`
}

// ApprovalsShow asks for one pending request.
type ApprovalsShow struct {
	ID string `json:"id"`
}

// ApprovalAnswer answers one pending request. Hash must be the request's
// (PendingRequest.Hash) for an approval; a denial may leave it empty.
type ApprovalAnswer struct {
	ID     string `json:"id"`
	Hash   string `json:"hash,omitempty"`
	Action string `json:"action"`
}

// ApprovalAnswered is the reply to an accepted answer.
type ApprovalAnswered struct {
	Decision string `json:"decision"`
}

// EventsSubscribe starts an event subscription after sequence number
// Since (0: every event the coordinator still keeps).
type EventsSubscribe struct {
	Since uint64 `json:"since"`
}

// Typed refusals of TypeApprovalsShow and TypeApprovalsAnswer.
var (
	ErrUnknownRequest   = &Error{Code: "unknown_request"}
	ErrStaleRequest     = &Error{Code: "stale_request"}
	ErrAnsweredFirst    = &Error{Code: "answered_first"}
	ErrAnswerNotAllowed = &Error{Code: "answer_not_allowed"}
)

// ApprovalsList lists the coordinator's pending requests.
func (c *Client) ApprovalsList(ctx context.Context) (ApprovalsList, error) {
	var l ApprovalsList
	err := c.call(ctx, TypeApprovalsList, nil, &l)
	return l, err
}

// ApprovalsShow returns one pending request (ErrUnknownRequest).
func (c *Client) ApprovalsShow(ctx context.Context, id string) (PendingRequest, error) {
	var r PendingRequest
	err := c.call(ctx, TypeApprovalsShow, ApprovalsShow{ID: id}, &r)
	return r, err
}

// ApprovalAnswer answers one pending request; a refusal is one of
// ErrUnknownRequest, ErrStaleRequest, ErrAnsweredFirst,
// ErrAnswerNotAllowed (with a message saying why).
func (c *Client) ApprovalAnswer(ctx context.Context, a ApprovalAnswer) (ApprovalAnswered, error) {
	var r ApprovalAnswered
	err := c.call(ctx, TypeApprovalsAnswer, a, &r)
	return r, err
}

// SubscribeEvents asks for the sandbox's events after since; each is
// given to handle, in order, until the connection ends (Done). The
// coordinator sends each as a request and sends the next only after the
// reply, so the order holds (the connection serves each message in a
// goroutine of its own) and a slow reader slows only its own stream.
func (c *Client) SubscribeEvents(ctx context.Context, since uint64, handle func(Event)) error {
	c.Handle(TypeEvent, func(_ context.Context, req *Request) (any, error) {
		var e Event
		if err := req.Decode(&e); err != nil {
			return nil, err
		}
		handle(e)
		return struct{}{}, nil
	})
	return c.call(ctx, TypeEventsSubscribe, EventsSubscribe{Since: since}, nil)
}
