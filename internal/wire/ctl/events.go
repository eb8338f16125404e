package ctl

import "time"

// EventsVersion is the version of Event's JSON form (its "v"): a script
// reading `lazaret events --json` checks it; a change that removes or
// retypes a field bumps it, a new field or kind does not.
const EventsVersion = 1

// Kinds of Event.
const (
	EventApprovalPending = "approval.pending"
	EventApprovalDecided = "approval.decided"
	EventNetDenied       = "net.denied"
	EventSessionStarted  = "session.started"
	EventSessionAttached = "session.attached"
	EventSessionDetached = "session.detached"
	EventSessionEnded    = "session.ended"
	EventAgentAttention  = "agent.attention"
	EventSandboxStopped  = "sandbox.stopped"
)

// Values of Event.RequestKind.
const (
	RequestEscalation = "escalation"
	RequestNetwork    = "network"
)

// Event is one line of `lazaret events --json`, and what the notifiers
// are given. Every field but Detail is lazaret's own words or an id;
// Detail is the sandbox's text (a request's command, a denied name),
// already escaped for a terminal (internal/visible), which a notifier
// leaves out unless [notify] include_request is set.
type Event struct {
	V    int       `json:"v"`
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// Profile and Workspace (the host path) name the sandbox.
	Profile   string `json:"profile"`
	Workspace string `json:"workspace"`
	// Session is the session's id (LAZARET_SESSION_ID).
	Session string `json:"session,omitempty"`
	// Request is a pending request's id (`lazaret approvals show ID`),
	// RequestKind RequestEscalation or RequestNetwork.
	Request     string `json:"request,omitempty"`
	RequestKind string `json:"request_kind,omitempty"`
	// Decision (approval.decided): "approve", "deny", "expired",
	// "withdrawn"; From: where the answer came from ("terminal of
	// session …", "lazaret approvals (pid N)", "timeout").
	Decision string `json:"decision,omitempty"`
	From     string `json:"from,omitempty"`
	// Reason is lazaret's own explanation (why a sandbox stopped, a
	// session ended).
	Reason string `json:"reason,omitempty"`
	// Detail: see the type's comment.
	Detail string `json:"detail,omitempty"`
}

// TypeSessionState reports a kept session's state (CLI → coordinator,
// payload SessionState, no reply payload): the keeper that holds its
// terminal tells the session's CLI, which tells its coordinator.
const TypeSessionState = "session.state"

// SessionState is the payload of TypeSessionState.
type SessionState struct {
	// Kept: the session's terminal is a keeper's (it can be detached).
	Kept bool `json:"kept"`
	// Attached: a terminal is attached to the keeper now.
	Attached bool `json:"attached"`
	// Attention: the agent rang the bell or printed an OSC 9/777
	// notification while detached (one report per ring, rate-limited by
	// the keeper).
	Attention bool `json:"attention,omitempty"`
}
