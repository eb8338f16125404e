// Package escalation is the coordinator's side of Host Escalation: the
// verification pipeline for requests arriving on the escalation socket, the
// auto-approve engine, routing to the requesting session's prompt, and the
// executor that runs an approved command on the host without a shell.
package escalation

import (
	"context"
	"time"
)

// Stages of the verification pipeline, in order. Every rejection names the
// stage that refused it.
const (
	StageMTLS       = "mtls"
	StageDecode     = "decode"
	StageSession    = "session"
	StageDelegation = "delegation"
	StageSignature  = "signature"
	StageReplay     = "replay"
	StagePolicy     = "policy"
)

// Event kinds written to the audit trail.
const (
	EventRejected = "escalation.rejected" // failed verification
	EventRequest  = "escalation.request"  // verified request and policy verdict
	EventDecision = "escalation.decision" // the human's answer
	EventResult   = "escalation.result"   // the host command finished
)

// Event is one audit record. Fields irrelevant to a kind are empty.
type Event struct {
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`
	Stage     string    `json:"stage,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
	Peer      string    `json:"peer,omitempty"`
	Profile   string    `json:"profile,omitempty"`
	Cwd       string    `json:"cwd,omitempty"`
	Argv      []string  `json:"argv,omitempty"`
	Command   string    `json:"command,omitempty"`
	// Justification is the agent's stated reason.
	Justification string `json:"justification,omitempty"`
	Executable    string `json:"executable,omitempty"`
	// Decision is "auto", "approve", "deny", "abort" or "edit".
	Decision  string `json:"decision,omitempty"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Duration  string `json:"duration,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Auditor receives every request, decision, result and rejection. The
// coordinator adapts the state store's append-only audit chain to it.
type Auditor interface {
	Audit(ctx context.Context, e Event) error
}

// AuditFunc adapts a function to Auditor.
type AuditFunc func(ctx context.Context, e Event) error

// Audit calls f.
func (f AuditFunc) Audit(ctx context.Context, e Event) error { return f(ctx, e) }
