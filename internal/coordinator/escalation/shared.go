package escalation

import (
	"context"
	"log/slog"

	"github.com/lazaret-dev/lazaret/internal/audit"
	"github.com/lazaret-dev/lazaret/internal/escalation"
)

// The names of the shared server the coordinator's callers and tests use,
// so they keep one import for the component and its events.
type (
	Auditor   = escalation.Auditor
	AuditFunc = escalation.AuditFunc
	Event     = escalation.Event
	Session   = escalation.Session
	Registry  = escalation.Registry
)

// Stages, decisions and the abort reason of the shared server.
const (
	EventRejected       = escalation.EventRejected
	EventDecision       = escalation.EventDecision
	StageSession        = escalation.StageSession
	StageDelegation     = escalation.StageDelegation
	StageDecode         = escalation.StageDecode
	StageSignature      = escalation.StageSignature
	StageReplay         = escalation.StageReplay
	DecisionDenied      = escalation.DecisionDenied
	ReasonAbortedByUser = escalation.ReasonAbortedByUser
)

// EntryAuditor is escalation.EntryAuditor.
func EntryAuditor(appendEntry func(context.Context, audit.Entry) (uint64, error)) Auditor {
	return escalation.EntryAuditor(appendEntry)
}

// LogAuditor writes audit events to the coordinator log (used when no
// state store is wired).
func LogAuditor(log *slog.Logger) Auditor {
	return AuditFunc(func(_ context.Context, e Event) error {
		log.Info("audit", "kind", e.Kind, "stage", e.Stage, "reason", e.Reason, "request", e.RequestID,
			"session", e.SessionID, "argv", e.Argv, "command", e.Command, "decision", e.Decision, "exit", e.ExitCode)
		return nil
	})
}
