package eschost

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
)

// EntryAuditor adapts the state store's append-only audit chain
// (store.Store.AppendAudit) to Auditor.
func EntryAuditor(appendEntry func(context.Context, audit.Entry) (uint64, error)) Auditor {
	return AuditFunc(func(ctx context.Context, e Event) error {
		_, err := appendEntry(ctx, Entry(e))
		return err
	})
}

// Entry converts an audit event into an audit trail entry.
func Entry(e Event) audit.Entry {
	en := audit.Entry{Time: e.Time, Profile: e.Profile, Session: e.SessionID}
	if e.RequestID != "" || e.Argv != nil || e.Command != "" {
		en.Request = &audit.Request{RequestID: e.RequestID, Argv: e.Argv, Command: e.Command, Cwd: e.Cwd, Justification: e.Justification}
	}
	switch e.Kind {
	case EventRejected:
		en.Kind = audit.KindEscalationRejected
		en.Rejection = &audit.Rejection{Stage: e.Stage, Reason: e.Reason}
	case EventRequest:
		en.Kind = audit.KindEscalationRequest
		if e.Reason != "" || e.Executable != "" {
			en.Fields = map[string]string{}
			if e.Reason != "" {
				en.Fields["prompt_reason"] = e.Reason
			}
			if e.Executable != "" {
				en.Fields["executable"] = e.Executable
			}
		}
	case EventDecision:
		en.Kind = audit.KindEscalationDecision
		en.Decision = &audit.Decision{Outcome: audit.Outcome(e.Decision), Argv: e.Argv, Rule: e.Rule, Reason: e.Reason}
		en.Fields = decisionFields(e)
	case EventResult:
		en.Kind = audit.KindEscalationResult
		r := &audit.Result{DurationMS: e.Duration.Milliseconds(), StdoutBytes: e.StdoutBytes, StderrBytes: e.StderrBytes,
			StdoutSHA256: e.StdoutSHA256, StderrSHA256: e.StderrSHA256, Truncated: e.Truncated, Error: e.Reason}
		if e.ExitCode != nil {
			r.ExitCode = *e.ExitCode
		}
		if e.TimedOut {
			r.Signal = "SIGKILL (time limit)"
		}
		en.Result = r
	}
	return en
}

// decisionFields are the audit fields of a decision: where it was asked,
// where the answer came from and under which answer_from, and whether it
// expired (nil when there is none).
func decisionFields(e Event) map[string]string {
	f := map[string]string{}
	for k, v := range map[string]string{"asked_on": e.AskedOn, "answered_from": e.AnsweredFrom, "answer_from": e.AnswerFrom} {
		if v != "" {
			f[k] = v
		}
	}
	if e.Expired {
		f["expired"] = "true"
	}
	if len(f) == 0 {
		return nil
	}
	return f
}
