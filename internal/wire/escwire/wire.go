// Package wire is the escalation protocol between lazaret-escalate and the
// coordinator: the signed request, its canonical encoding, strict decoding,
// and the response frames. It imports only the standard library and
// internal/engine/session so the static client stays small.
//
// Protocol, over TLS 1.3 with mutual authentication on the escalation
// socket: the client sends one request as a single JSON line (at most
// MaxRequest bytes); the server answers with a sequence of JSON-line
// frames: optionally "pending" (a human is being asked), then any number
// of "stdout"/"stderr" data frames, and finally exactly one of "exit"
// (with the host command's exit code), "denied" (with the human's or the
// policy's reason) or "error" (a generic refusal: the reason of a
// verification failure goes only to the audit trail).
package escwire

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
)

// MaxRequest bounds one request line.
const MaxRequest = 64 << 10

// Field limits.
const (
	maxArgs  = 1024
	maxField = 16 << 10
	// maxSignature bounds an ASN.1 DER ECDSA P-256 signature.
	maxSignature = 72
	// requestTag v3: the request's kind and a proposal's fields are
	// signed (v2 knew only escalations; v1 used Ed25519).
	requestTag = "lazaret/request/v3"
)

// Kinds of request (Request.Kind). An escalation leaves Kind empty (its
// one spelling); the others are the policy proposal loop (docs/POLICY.md).
const (
	// KindEscalate asks to run Argv or Command on the host.
	KindEscalate = ""
	// KindPropose proposes a policy rule: Proposal is ProposeNet (Target
	// is HOST[:PORT], a name, an address or a CIDR) or ProposeExec (Argv
	// is the auto_approve entry's words).
	KindPropose = "propose"
	// KindWait waits for the decision on proposal ProposalID.
	KindWait = "wait"
	// KindDenials asks for the sandbox's recent network denials.
	KindDenials = "denials"
)

// Proposal kinds (Request.Proposal).
const (
	ProposeNet  = "net"
	ProposeExec = "exec"
)

// MaxTarget bounds a proposed network target: a name is at most 253
// bytes; anything longer is refused before it is checked or stored.
const MaxTarget = 1024

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed escalation request")

// Request is one escalation request.
type Request struct {
	RequestID string `json:"request_id"`
	SessionID string `json:"session_id"`
	Profile   string `json:"profile"`
	Cwd       string `json:"cwd"`
	// Kind is one of the Kind* constants; a proposal's Proposal, Target
	// and a wait's ProposalID are empty for every other kind.
	Kind          string   `json:"kind,omitempty"`
	Proposal      string   `json:"proposal,omitempty"`
	Target        string   `json:"target,omitempty"`
	ProposalID    string   `json:"proposal_id,omitempty"`
	Argv          []string `json:"argv,omitempty"`
	Command       string   `json:"command,omitempty"`
	Justification string   `json:"justification"`
	// Timestamp is Unix milliseconds at the client.
	Timestamp  int64              `json:"timestamp"`
	Nonce      string             `json:"nonce"`
	Delegation session.Delegation `json:"delegation"`
	Signature  []byte             `json:"signature"`
}

// Canonical is the signed encoding (see session's encoding rules): tag
// "lazaret/request/v3", then request_id, session_id, profile, cwd, kind,
// proposal, target, proposal_id, argv (list), command, justification,
// timestamp, nonce, the delegation's own
// canonical encoding (as bytes) and the delegation's signature (as bytes).
// Every field except the request signature is covered. An empty argv is
// encoded as absent, as JSON (omitempty) carries it.
func (r *Request) Canonical() []byte {
	argv := r.Argv
	if len(argv) == 0 {
		argv = nil
	}
	return session.NewEncoder(requestTag).
		String(r.RequestID).String(r.SessionID).String(r.Profile).String(r.Cwd).
		String(r.Kind).String(r.Proposal).String(r.Target).String(r.ProposalID).
		List(argv).String(r.Command).String(r.Justification).Int64(r.Timestamp).
		String(r.Nonce).Bytes(r.Delegation.Canonical()).Bytes(r.Delegation.Signature).Sum()
}

// Sign sets Signature with the delegated key: ECDSA P-256 over the SHA-256
// of the canonical encoding, ASN.1 DER.
func (r *Request) Sign(key *ecdsa.PrivateKey) error {
	digest := sha256.Sum256(r.Canonical())
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		return err
	}
	r.Signature = sig
	return nil
}

// VerifySignature checks Signature against the delegation's key (a valid
// P-256 point, or nothing verifies). The delegation itself is checked
// separately (session.Delegation.Verify).
func (r *Request) VerifySignature() bool {
	if len(r.Delegation.DelegatedPub) != session.DelegatedPubSize || len(r.Signature) == 0 || len(r.Signature) > maxSignature {
		return false
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), r.Delegation.DelegatedPub)
	if err != nil {
		return false
	}
	digest := sha256.Sum256(r.Canonical())
	return ecdsa.VerifyASN1(pub, digest[:], r.Signature)
}

// RandomID returns 128 random bits in hex, for request ids and nonces.
func RandomID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// Encode marshals r as one JSON line.
func (r *Request) Encode() ([]byte, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(js, '\n'), nil
}

// Decode parses one request strictly: exactly one JSON object, no unknown
// fields, ids and nonce of the generated form, the fields its kind carries
// and no other (an escalation: exactly one of argv and command;
// checkKind), valid UTF-8 and bounded sizes. It does not verify anything
// cryptographic.
func Decode(data []byte) (*Request, error) {
	if len(data) > MaxRequest {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(data))
	}
	var r Request
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: trailing data", ErrMalformed)
	}
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return &r, nil
}

func (r *Request) check() error {
	if !session.ValidID(r.RequestID) || !session.ValidID(r.Nonce) {
		return errors.New("request_id and nonce must be 32 lowercase hex digits")
	}
	if !session.ValidID(r.SessionID) {
		return errors.New("bad session_id")
	}
	if err := r.checkKind(); err != nil {
		return err
	}
	if len(r.Argv) > maxArgs {
		return errors.New("too many arguments")
	}
	if r.Argv != nil && r.Argv[0] == "" {
		return errors.New("empty argv[0]")
	}
	for _, s := range append([]string{r.Profile, r.Cwd, r.Command, r.Justification, r.Target}, r.Argv...) {
		if len(s) > maxField || !utf8.ValidString(s) {
			return errors.New("field too long or not UTF-8")
		}
	}
	if len(r.Signature) == 0 || len(r.Signature) > maxSignature {
		return errors.New("bad signature size")
	}
	return nil
}

// checkKind checks the fields each kind carries, and that it carries no
// other: an escalation exactly one of argv and command, a network
// proposal a target of at most MaxTarget bytes, an exec proposal its
// argv, a wait a proposal id (8 lowercase hex digits), a denials request
// nothing.
func (r *Request) checkKind() error {
	noProposal := r.Proposal == "" && r.Target == "" && r.ProposalID == ""
	switch r.Kind {
	case KindEscalate:
		if (len(r.Argv) == 0) == (r.Command == "") {
			return errors.New("exactly one of argv and command must be given")
		}
		if !noProposal {
			return errors.New("an escalation carries no proposal fields")
		}
	case KindPropose:
		return r.checkProposal()
	case KindWait:
		if len(r.Argv) > 0 || r.Command != "" || r.Proposal != "" || r.Target != "" || !ValidProposalID(r.ProposalID) {
			return errors.New("a wait carries a proposal_id (8 lowercase hex digits) and nothing else")
		}
	case KindDenials:
		if len(r.Argv) > 0 || r.Command != "" || !noProposal {
			return errors.New("a denials request carries no command or proposal")
		}
	default:
		return fmt.Errorf("unknown kind %q", r.Kind)
	}
	return nil
}

func (r *Request) checkProposal() error {
	if r.Command != "" || r.ProposalID != "" {
		return errors.New("a proposal carries no command or proposal_id")
	}
	switch r.Proposal {
	case ProposeNet:
		if r.Target == "" || len(r.Target) > MaxTarget || len(r.Argv) > 0 {
			return fmt.Errorf("a network proposal carries a target of 1 to %d bytes and no argv", MaxTarget)
		}
	case ProposeExec:
		if len(r.Argv) == 0 || r.Target != "" {
			return errors.New("an exec proposal carries argv and no target")
		}
	default:
		return fmt.Errorf("unknown proposal %q: want %q or %q", r.Proposal, ProposeNet, ProposeExec)
	}
	return nil
}

// ValidProposalID reports whether s has the form of a proposal's id: 8
// lowercase hex digits (the coordinator's pending requests' ids).
func ValidProposalID(s string) bool {
	if len(s) != 8 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Frame types.
const (
	FramePending = "pending"
	FrameStdout  = "stdout"
	FrameStderr  = "stderr"
	FrameExit    = "exit"
	FrameDenied  = "denied"
	FrameError   = "error"
)

// Frame is one response frame.
type Frame struct {
	Type    string `json:"type"`
	Data    []byte `json:"data,omitempty"`
	Code    int    `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// GenericRejection is all a sandbox learns about a failed verification.
const GenericRejection = "request rejected by the coordinator (details in the audit trail)"
