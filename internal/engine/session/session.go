// Package session is the Session Anchor: the Ed25519 keypair and random
// LAZARET_SESSION_ID of one lazaret CLI, and the short-lived delegated keys
// (ECDSA P-256) it hands to each `podman exec` together with a delegation
// signed by the session key. The session private key never leaves the CLI process; a
// sandbox only ever holds a delegated key, which the coordinator accepts
// while the delegation is unexpired, names this sandbox, and the session is
// still registered (the CLI is still connected).
package session

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// Environment variables that carry a delegation into the sandbox.
const (
	EnvSessionID    = "LAZARET_SESSION_ID"
	EnvDelegation   = "LAZARET_DELEGATION"
	EnvDelegatedKey = "LAZARET_DELEGATED_KEY"
	// EnvSessionSocket names, in a session's processes, the socket of its
	// holder, which keeps the delegated key (HolderVerb).
	EnvSessionSocket = "LAZARET_SESSION_SOCKET"
)

// HolderVerb is the hidden first argument of lazaret-escalate (the C
// front end) that makes it a session holder: the first process of a
// session in the sandbox, which becomes non-dumpable, reads the
// delegation from descriptor 3 and has requests signed for its own
// session's processes only.
const HolderVerb = "__session"

// DefaultDelegationTTL bounds a delegation. A shell may run for a working
// day; the delegation also dies earlier, when its CLI disconnects and the
// coordinator forgets the session.
const DefaultDelegationTTL = 12 * time.Hour

// delegationTag is the domain-separation tag of the delegation encoding.
// v2: the delegated key is ECDSA P-256 (v1 delegated an Ed25519 key).
const delegationTag = "lazaret/delegation/v2"

// DelegatedPubSize is the length of a delegated public key: an uncompressed
// SEC 1 P-256 point.
//
// Why P-256 and not Ed25519 like the session key: the delegated key signs
// inside the sandbox, in a process (lazaret-escalate) that lives for one
// request. Go builds Ed25519's base-point table on a process's first
// Ed25519 key derivation or signature, about 1.4 ms of CPU every time
// (1.4-2 ms measured inside runsc); P-256's table is compiled into the
// binary, and the client already uses P-256 for its TLS certificate. The
// session key signs on the host, once per exec, and stays Ed25519.
const DelegatedPubSize = 65

// Errors of delegation checks; all are wrapped.
var (
	ErrNoSession         = errors.New("no lazaret session in the environment")
	ErrBadDelegation     = errors.New("malformed delegation")
	ErrExpired           = errors.New("delegation expired")
	ErrWrongSandbox      = errors.New("delegation is for another sandbox")
	ErrWrongSession      = errors.New("delegation is for another session")
	ErrBadDelegationSig  = errors.New("delegation signature invalid")
	ErrMalformedIdentity = errors.New("malformed session id")
)

// Anchor is one CLI's Session Anchor.
type Anchor struct {
	ID      string
	Public  ed25519.PublicKey
	private ed25519.PrivateKey
}

// New makes a fresh keypair and a random 128-bit session id.
func New() (*Anchor, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	return &Anchor{ID: hex.EncodeToString(id[:]), Public: pub, private: priv}, nil
}

// ValidID reports whether id has the form New produces (32 lowercase hex).
func ValidID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Delegation says: the holder of DelegatedPub (a P-256 key, see
// DelegatedPubSize) may sign escalation requests for session SessionID in
// sandbox SandboxID until NotAfter (Unix seconds).
type Delegation struct {
	SessionID    string `json:"session_id"`
	DelegatedPub []byte `json:"delegated_pub"`
	NotAfter     int64  `json:"not_after"`
	SandboxID    string `json:"sandbox_id"`
	Signature    []byte `json:"signature"`
}

// Canonical is the signed encoding: tag "lazaret/delegation/v2", then
// session_id, delegated_pub, not_after, sandbox_id.
func (d *Delegation) Canonical() []byte {
	return NewEncoder(delegationTag).String(d.SessionID).Bytes(d.DelegatedPub).Int64(d.NotAfter).String(d.SandboxID).Sum()
}

// Verify checks the delegation against the registered session key
// sessionPub, the session it must belong to, the sandbox it must name, and
// the time now.
func (d *Delegation) Verify(sessionPub ed25519.PublicKey, sessionID, sandboxID string, now time.Time) error {
	if len(d.DelegatedPub) != DelegatedPubSize || len(d.Signature) != ed25519.SignatureSize || len(sessionPub) != ed25519.PublicKeySize {
		return ErrBadDelegation
	}
	if d.SessionID != sessionID {
		return ErrWrongSession
	}
	if !ed25519.Verify(sessionPub, d.Canonical(), d.Signature) {
		return ErrBadDelegationSig
	}
	if d.SandboxID != sandboxID {
		return ErrWrongSandbox
	}
	if now.Unix() > d.NotAfter {
		return ErrExpired
	}
	return nil
}

// Delegated is what one `podman exec` receives: the session id, the
// delegated private key and its delegation.
type Delegated struct {
	SessionID  string
	Key        *ecdsa.PrivateKey
	Delegation Delegation
}

// Delegate makes a fresh delegated key for sandboxID valid for ttl from now.
func (a *Anchor) Delegate(sandboxID string, ttl time.Duration, now time.Time) (*Delegated, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	pub, err := priv.PublicKey.Bytes()
	if err != nil {
		return nil, err
	}
	d := Delegation{SessionID: a.ID, DelegatedPub: pub, NotAfter: now.Add(ttl).Unix(), SandboxID: sandboxID}
	d.Signature = ed25519.Sign(a.private, d.Canonical())
	return &Delegated{SessionID: a.ID, Key: priv, Delegation: d}, nil
}

// Env returns the KEY=value entries to add to the exec environment (the
// delegated key as its 32-byte private scalar).
func (d *Delegated) Env() []string {
	js, _ := json.Marshal(&d.Delegation)
	scalar, _ := d.Key.Bytes()
	return []string{
		EnvSessionID + "=" + d.SessionID,
		EnvDelegation + "=" + base64.RawURLEncoding.EncodeToString(js),
		EnvDelegatedKey + "=" + base64.RawURLEncoding.EncodeToString(scalar),
	}
}

// Channel returns one end of a connected UNIX socket pair holding the
// delegation as Env's NAME=VALUE lines, the other end closed: the session
// holder's descriptor 3 (`podman exec --preserve-fds 1`). A socket, not a
// pipe: under runsc (as in Linux) another process can reopen a pipe
// through /proc/PID/fd of a process that is still dumpable, never a
// socket (ENXIO, measured), so nothing can read the key before the holder
// has made itself non-dumpable.
func (d *Delegated) Channel() (*os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("delegation channel: %w", err)
	}
	w := os.NewFile(uintptr(fds[1]), "delegation-w")
	defer w.Close()
	r := os.NewFile(uintptr(fds[0]), "delegation")
	// A few hundred bytes: the socket buffer holds them without a reader.
	if _, err := w.WriteString(strings.Join(d.Env(), "\n") + "\n"); err != nil {
		r.Close()
		return nil, fmt.Errorf("delegation channel: %w", err)
	}
	return r, nil
}

// FromEnv reads a Delegated from the environment (lazaret-escalate).
func FromEnv(getenv func(string) string) (*Delegated, error) {
	id, dl, key := getenv(EnvSessionID), getenv(EnvDelegation), getenv(EnvDelegatedKey)
	if id == "" || dl == "" || key == "" {
		var missing []string
		for _, kv := range [][2]string{{EnvSessionID, id}, {EnvDelegation, dl}, {EnvDelegatedKey, key}} {
			if kv[1] == "" {
				missing = append(missing, kv[0])
			}
		}
		return nil, fmt.Errorf("%w (%v not set; run this inside `lazaret shell` or `lazaret exec`)", ErrNoSession, missing)
	}
	if !ValidID(id) {
		return nil, fmt.Errorf("%s: %w", EnvSessionID, ErrMalformedIdentity)
	}
	js, err := base64.RawURLEncoding.DecodeString(dl)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", EnvDelegation, ErrBadDelegation, err)
	}
	d, err := DecodeDelegation(js)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvDelegation, err)
	}
	scalar, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: not base64", EnvDelegatedKey, ErrBadDelegation)
	}
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: not a P-256 private key", EnvDelegatedKey, ErrBadDelegation)
	}
	if pub, err := priv.PublicKey.Bytes(); err != nil || !bytes.Equal(pub, d.DelegatedPub) {
		return nil, fmt.Errorf("%s: %w: key does not match the delegation", EnvDelegatedKey, ErrBadDelegation)
	}
	return &Delegated{SessionID: id, Key: priv, Delegation: *d}, nil
}

// DecodeDelegation parses a delegation's JSON strictly (unknown fields and
// trailing data are errors) and checks its field sizes.
func DecodeDelegation(js []byte) (*Delegation, error) {
	var d Delegation
	if err := decodeStrict(js, &d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadDelegation, err)
	}
	if !ValidID(d.SessionID) || len(d.DelegatedPub) != DelegatedPubSize || len(d.Signature) != ed25519.SignatureSize || d.SandboxID == "" {
		return nil, ErrBadDelegation
	}
	return &d, nil
}
