// Package audit defines the entries of the tamper-evident audit trail: their
// kinds and typed contents, the canonical encoding that is hashed, the
// verification of a hash chain, and the escaping used to display entries.
// Storage lives in internal/engine/store; this package never touches a file.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Kind is what an entry records.
type Kind string

// The kinds of entries. Escalation entries of one request share
// Request.RequestID.
const (
	KindEscalationRequest  Kind = "escalation.request"  // a request that reached the coordinator
	KindEscalationRejected Kind = "escalation.rejected" // refused by a verification stage
	KindEscalationDecision Kind = "escalation.decision" // auto, approved, denied or edited
	KindEscalationResult   Kind = "escalation.result"   // what the executor returned
	KindSandboxStart       Kind = "sandbox.start"
	KindSandboxStop        Kind = "sandbox.stop"
	KindPolicyChange       Kind = "policy.change"
	KindSessionStart       Kind = "session.start"
	KindSessionEnd         Kind = "session.end"
	// Git Sentry: a sandbox branch the ref sync did not bring to the host
	// (its name is refused), and a synced commit whose message or identity
	// holds control, bidi or invisible characters.
	KindGitRefSkipped    Kind = "git.ref_skipped"
	KindGitCommitFlagged Kind = "git.commit_flagged"
	// A secret's placeholder on its way to a host the secret is not for
	// (netd left it as it was).
	KindSecretRefused Kind = "secret.placeholder_refused"
	// A resource limit acted on the sandbox: an OOM kill inside, a pause
	// at the disk reserve and its resume, a stop at the memory ceiling
	// (Fields: event, limit, usage).
	KindSandboxLimit Kind = "sandbox.limit"
)

// Kinds lists every known kind in a stable order.
var Kinds = []Kind{
	KindEscalationRequest, KindEscalationRejected, KindEscalationDecision, KindEscalationResult,
	KindSandboxStart, KindSandboxStop, KindPolicyChange, KindSessionStart, KindSessionEnd,
}

// GitKinds are the Git Sentry's kinds (kept apart from Kinds, whose order
// the store's tests pin).
var GitKinds = []Kind{KindGitRefSkipped, KindGitCommitFlagged, KindSecretRefused, KindSandboxLimit}

// Known reports whether k is one of Kinds.
func (k Kind) Known() bool {
	for _, x := range Kinds {
		if x == k {
			return true
		}
	}
	for _, x := range GitKinds {
		if x == k {
			return true
		}
	}
	return false
}

// Outcome is the decision taken on an escalation request.
type Outcome string

// Decision outcomes.
const (
	OutcomeAuto     Outcome = "auto"     // an auto_approve rule matched
	OutcomeApproved Outcome = "approved" // the human approved the argv as asked
	OutcomeDenied   Outcome = "denied"   // the human denied, or no TTY to ask
	OutcomeEdited   Outcome = "edited"   // the human approved an edited argv
)

// Request describes the escalation request an escalation.* entry is about.
type Request struct {
	RequestID     string   `json:"request_id"`
	Argv          []string `json:"argv,omitempty"`
	Command       string   `json:"command,omitempty"` // the raw string when the request carried one
	Cwd           string   `json:"cwd,omitempty"`
	Justification string   `json:"justification,omitempty"`
}

// Rejection is why a verification stage refused a request.
type Rejection struct {
	// Stage names the verification step ("mtls", "session", "delegation",
	// "signature", "replay", "policy", "decode", ...).
	Stage  string `json:"stage"`
	Reason string `json:"reason,omitempty"`
}

// Decision is what was decided about a request.
type Decision struct {
	Outcome Outcome `json:"outcome"`
	// Argv is the argv that will run: the edited one for OutcomeEdited.
	Argv []string `json:"argv,omitempty"`
	// Rule is the auto_approve entry that matched (OutcomeAuto).
	Rule string `json:"rule,omitempty"`
	// Reason says why it was denied without asking (for example "no TTY").
	Reason string `json:"reason,omitempty"`
}

// Result is what the executor returned for an approved request.
type Result struct {
	ExitCode     int    `json:"exit_code"`
	Signal       string `json:"signal,omitempty"` // set when the command was killed
	DurationMS   int64  `json:"duration_ms"`
	StdoutBytes  int64  `json:"stdout_bytes"`
	StderrBytes  int64  `json:"stderr_bytes"`
	StdoutSHA256 string `json:"stdout_sha256"`
	StderrSHA256 string `json:"stderr_sha256"`
	// Truncated is set when an output limit cut the output short; the sizes
	// and hashes are of what was kept.
	Truncated bool `json:"truncated,omitempty"`
	// Error is set when the command could not be started at all.
	Error string `json:"error,omitempty"`
}

// Entry is one record of the audit trail. Seq, Prev and Hash are assigned by
// the store when the entry is appended; callers fill in the rest.
type Entry struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Kind    Kind      `json:"kind"`
	Profile string    `json:"profile,omitempty"`
	Session string    `json:"session,omitempty"`

	Request   *Request   `json:"request,omitempty"`
	Rejection *Rejection `json:"rejection,omitempty"`
	Decision  *Decision  `json:"decision,omitempty"`
	Result    *Result    `json:"result,omitempty"`
	// Fields carries the details of the other kinds: container and image
	// for sandbox.*, the changed key and old/new values for policy.change,
	// exit code for session.end.
	Fields map[string]string `json:"fields,omitempty"`

	// Prev is the hex SHA-256 of the previous entry's canonical encoding
	// (GenesisPrev for the first entry).
	Prev string `json:"prev"`
	// Hash is the hex SHA-256 of this entry's canonical encoding. It is not
	// part of that encoding.
	Hash string `json:"hash,omitempty"`
}

// GenesisPrev is the Prev of the first entry of a chain.
const GenesisPrev = "0000000000000000000000000000000000000000000000000000000000000000"

// Validate reports an entry whose kind is unknown or that lacks the
// content its kind requires. The store refuses such an entry, so a trail
// never holds an escalation.result without a result.
func (e *Entry) Validate() error {
	if !e.Kind.Known() {
		return fmt.Errorf("audit entry: unknown kind %q", e.Kind)
	}
	needRequest := func() error {
		if e.Request == nil || e.Request.RequestID == "" {
			return fmt.Errorf("audit entry %s: request with request_id required", e.Kind)
		}
		return nil
	}
	switch e.Kind {
	case KindEscalationRequest:
		return needRequest()
	case KindEscalationRejected:
		// A request rejected before it could be decoded has no id yet, so
		// only the stage is required.
		if e.Rejection == nil || e.Rejection.Stage == "" {
			return fmt.Errorf("audit entry %s: rejection with stage required", e.Kind)
		}
	case KindEscalationDecision:
		if err := needRequest(); err != nil {
			return err
		}
		if e.Decision == nil {
			return fmt.Errorf("audit entry %s: decision required", e.Kind)
		}
		switch e.Decision.Outcome {
		case OutcomeAuto, OutcomeApproved, OutcomeDenied:
		case OutcomeEdited:
			if len(e.Decision.Argv) == 0 {
				return fmt.Errorf("audit entry %s: edited decision without the edited argv", e.Kind)
			}
		default:
			return fmt.Errorf("audit entry %s: unknown outcome %q", e.Kind, e.Decision.Outcome)
		}
	case KindEscalationResult:
		if err := needRequest(); err != nil {
			return err
		}
		if e.Result == nil {
			return fmt.Errorf("audit entry %s: result required", e.Kind)
		}
	}
	return nil
}

// Canonical returns the encoding that is hashed: the JSON of the entry with
// Hash left out, the time in UTC. encoding/json writes struct fields in
// declaration order and map keys sorted, so the encoding is deterministic.
// The store keeps these exact bytes, and verification hashes the stored
// bytes rather than a re-encoding, so nothing a decoder ignores escapes the
// hash.
func (e Entry) Canonical() ([]byte, error) {
	e.Hash = ""
	e.Time = e.Time.UTC().Round(0)
	return json.Marshal(e)
}

// Sum is the hex SHA-256 of b.
func Sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Seal fills in seq, prev and hash and returns the canonical encoding to
// store. The entry must be valid.
func Seal(e *Entry, seq uint64, prev string) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	e.Seq, e.Prev, e.Time = seq, prev, e.Time.UTC().Round(0)
	body, err := e.Canonical()
	if err != nil {
		return nil, fmt.Errorf("audit entry %d: encode: %w", seq, err)
	}
	e.Hash = Sum(body)
	return body, nil
}

// Decode parses a stored canonical encoding and sets Hash to its digest.
func Decode(body []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(body, &e); err != nil {
		return Entry{}, fmt.Errorf("decode audit entry: %w", err)
	}
	if e.Hash != "" {
		return Entry{}, errors.New("decode audit entry: canonical encoding carries a hash")
	}
	e.Hash = Sum(body)
	return e, nil
}
