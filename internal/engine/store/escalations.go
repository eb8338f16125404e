package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
)

// Escalation is the state of one verified escalation request
// (escalations_v1), updated as it is decided and run. The audit trail holds
// the history; this record is the latest state, for status displays.
// AppendAudit maintains it from escalation entries; RecordEscalation
// writes one directly.
type Escalation struct {
	RequestID     string    `json:"request_id"`
	SessionID     string    `json:"session_id"`
	Profile       string    `json:"profile"`
	Argv          []string  `json:"argv,omitempty"`
	Command       string    `json:"command,omitempty"`
	Cwd           string    `json:"cwd,omitempty"`
	Justification string    `json:"justification,omitempty"`
	Received      time.Time `json:"received"`
	// Outcome is "" while pending, then auto/approved/denied/edited.
	Outcome string `json:"outcome,omitempty"`
	// RunArgv is the argv that ran (the edited one for "edited").
	RunArgv  []string  `json:"run_argv,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Finished time.Time `json:"finished,omitzero"`
	// AuditSeqs are the audit entries written about this request.
	AuditSeqs []uint64 `json:"audit_seqs,omitempty"`
}

// RecordEscalation stores (or replaces) the state of a request, keyed by its
// request id.
func (s *Store) RecordEscalation(ctx context.Context, e Escalation) error {
	if e.RequestID == "" {
		return errors.New("record escalation: empty request id")
	}
	e.Received = e.Received.UTC().Round(0)
	e.Finished = e.Finished.UTC().Round(0)
	v, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("record escalation %s: %w", e.RequestID, err)
	}
	return s.write(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEscalations).Put([]byte(e.RequestID), v)
	})
}

// Escalation returns the state of request id; ok is false when none is
// recorded.
func (s *Store) Escalation(ctx context.Context, id string) (e Escalation, ok bool, err error) {
	err = s.read(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketEscalations).Get([]byte(id))
		if v == nil {
			ok = false
			return nil
		}
		ok = true
		return json.Unmarshal(v, &e)
	})
	return e, ok, err
}

// trackEscalation keeps escalations_v1 in step with the audit trail, in the
// same transaction as the append: a verified request (escalation.request)
// creates its record, its decision and result complete it. Rejected
// requests were never verified and only go to the audit trail.
func trackEscalation(tx *bolt.Tx, e *audit.Entry) error {
	if e.Request == nil || e.Request.RequestID == "" {
		return nil
	}
	switch e.Kind {
	case audit.KindEscalationRequest, audit.KindEscalationDecision, audit.KindEscalationResult:
	default:
		return nil
	}
	b := tx.Bucket(bucketEscalations)
	key := []byte(e.Request.RequestID)
	var rec Escalation
	if v := b.Get(key); v != nil {
		if err := json.Unmarshal(v, &rec); err != nil {
			// Derived state must never keep the audit entry from being
			// written: start the record afresh from this entry.
			rec = Escalation{RequestID: e.Request.RequestID}
		}
	} else if e.Kind != audit.KindEscalationRequest {
		return nil // a decision or result of a request recorded before tracking
	}
	switch e.Kind {
	case audit.KindEscalationRequest:
		r := e.Request
		rec = Escalation{RequestID: r.RequestID, SessionID: e.Session, Profile: e.Profile, Argv: r.Argv, Command: r.Command,
			Cwd: r.Cwd, Justification: r.Justification, Received: e.Time, AuditSeqs: rec.AuditSeqs}
	case audit.KindEscalationDecision:
		rec.Outcome = string(e.Decision.Outcome)
		rec.RunArgv = e.Decision.Argv
	case audit.KindEscalationResult:
		code := e.Result.ExitCode
		rec.ExitCode, rec.Finished = &code, e.Time
	}
	rec.AuditSeqs = append(rec.AuditSeqs, e.Seq)
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return b.Put(key, v)
}
