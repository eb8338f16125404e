// Package escalation is the host's side of Host Escalation, shared by the
// coordinator (internal/coordinator/escalation wraps it as a sandbox
// component) and lazaret-kube (a cluster sandbox's requests arrive through
// the API server): the verification pipeline for requests arriving over
// mutual TLS, the replay check, the auto-approve engine, routing to the
// requesting session's prompt, the audit events, and the executor that
// runs an approved command on the host without a shell.
package eschost

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
	// Decision is one of the Decision* constants.
	Decision string `json:"decision,omitempty"`
	// Rule is the auto_approve entry that matched.
	Rule         string        `json:"rule,omitempty"`
	ExitCode     *int          `json:"exit_code,omitempty"`
	Duration     time.Duration `json:"duration,omitempty"`
	TimedOut     bool          `json:"timed_out,omitempty"`
	Truncated    bool          `json:"truncated,omitempty"`
	StdoutBytes  int64         `json:"stdout_bytes,omitempty"`
	StderrBytes  int64         `json:"stderr_bytes,omitempty"`
	StdoutSHA256 string        `json:"stdout_sha256,omitempty"`
	StderrSHA256 string        `json:"stderr_sha256,omitempty"`
	// AskedOn, on a decision a human was asked for, names the terminal
	// the prompt was on.
	AskedOn string `json:"asked_on,omitempty"`
	// AnsweredFrom names where the answer came from (the session's
	// terminal, `lazaret approvals` with its pid and uid, "timeout"),
	// AnswerFrom the [escalation] answer_from in force, Expired a request
	// denied because pending_timeout passed.
	AnsweredFrom string `json:"answered_from,omitempty"`
	AnswerFrom   string `json:"answer_from,omitempty"`
	Expired      bool   `json:"expired,omitempty"`
}

// Decisions recorded in EventDecision.
const (
	DecisionAuto     = "auto"     // an auto_approve entry matched
	DecisionApproved = "approved" // the human approved the argv as asked
	DecisionEdited   = "edited"   // the human approved an edited argv
	DecisionDenied   = "denied"   // the human denied or aborted, or no terminal
)

// ReasonAbortedByUser is the reason of a denial the human gave with Q
// (abort lazaret); the CLI then stops the sandbox with
// ctl.StopCauseEscalationAbort.
const ReasonAbortedByUser = "aborted by the user (Q)"

// Auditor receives every request, decision, result and rejection. The
// coordinator adapts the state store's append-only audit chain to it.
type Auditor interface {
	Audit(ctx context.Context, e Event) error
}

// AuditFunc adapts a function to Auditor.
type AuditFunc func(ctx context.Context, e Event) error

// Audit calls f.
func (f AuditFunc) Audit(ctx context.Context, e Event) error { return f(ctx, e) }
