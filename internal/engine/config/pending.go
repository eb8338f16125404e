package config

import (
	"time"
)

// Values of [escalation] answer_from.
const (
	// AnswerFromSession: a prompt is answered on the terminal of the
	// session that asked, and nowhere else (the default, as the
	// specification routes prompts).
	AnswerFromSession = "session"
	// AnswerFromAny: `lazaret approvals answer` from any terminal of the
	// same host user answers it too.
	AnswerFromAny = "any"
)

// MaxPendingTimeout bounds pending_timeout.
const MaxPendingTimeout = 7 * 24 * time.Hour

// pending reads [escalation] answer_from and pending_timeout.
func (v *validator) pending(fc *fileConfig, cfg *Config) {
	cfg.Escalation.AnswerFrom = AnswerFromSession
	if f := fc.Escalation.AnswerFrom; f != nil {
		switch *f {
		case AnswerFromSession, AnswerFromAny:
			cfg.Escalation.AnswerFrom = *f
		default:
			v.fail(keyPath{"escalation", "answer_from"}, ruleErrf("invalid answer_from %s: want %q (only the asking session's terminal) or %q (also `lazaret approvals answer` from any terminal of this user)",
				quoteValue(*f), AnswerFromSession, AnswerFromAny))
		}
	}
	if f := fc.Escalation.PendingTimeout; f != nil {
		d, err := time.ParseDuration(*f)
		if err != nil || d < time.Second || d > MaxPendingTimeout {
			v.fail(keyPath{"escalation", "pending_timeout"}, ruleErrf("invalid pending_timeout %s: a duration such as \"30m\" or \"2h\", from 1s to %s (leave it out to wait until answered)",
				quoteValue(*f), MaxPendingTimeout))
		} else {
			cfg.Escalation.PendingTimeout = d
		}
	}
}
