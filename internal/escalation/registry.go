package escalation

import (
	"context"
	"crypto/ed25519"
	"errors"
	"sync"
	"time"
)

// Action is a human's answer to a prompt.
type Action int

// Actions.
const (
	Deny Action = iota
	Approve
	Abort // deny and stop lazaret (the CLI asks the coordinator to stop)
)

func (a Action) String() string {
	switch a {
	case Approve:
		return "approve"
	case Abort:
		return "abort"
	}
	return "deny"
}

// PromptRequest is what the human is shown.
type PromptRequest struct {
	RequestID     string   `json:"request_id"`
	Profile       string   `json:"profile"`
	Justification string   `json:"justification"`
	Cwd           string   `json:"cwd"`      // in the sandbox
	HostDir       string   `json:"host_dir"` // where it would run
	Command       string   `json:"command,omitempty"`
	Argv          []string `json:"argv,omitempty"` // nil when Command is not a simple command
	Executable    string   `json:"executable,omitempty"`
	Reason        string   `json:"reason"` // why it was not auto-approved
	// Path is the PATH the coordinator resolves and runs commands with, so
	// an edited command resolves on the human's screen as it will run.
	Path string `json:"path,omitempty"`
	// The session that asked, as its CLI announced it (command) and as the
	// coordinator saw it (pid from SO_PEERCRED, attach time).
	SessionCommand []string  `json:"session_command,omitempty"`
	SessionPID     int       `json:"session_pid,omitempty"`
	SessionStarted time.Time `json:"session_started,omitzero"`
}

// Answer is the human's decision. For an edited command Argv is the new
// argument vector and Executable what it resolved to on the screen the
// human approved; the server resolves again and refuses a difference.
type Answer struct {
	Action Action `json:"action"`
	// Reason explains a denial that no human made (no terminal).
	Reason     string   `json:"reason,omitempty"`
	Argv       []string `json:"argv,omitempty"`
	Executable string   `json:"executable,omitempty"`
}

// Prompter asks the human of one session. It must return when ctx ends
// (the requester went away).
type Prompter interface {
	Prompt(ctx context.Context, r PromptRequest) (Answer, error)
}

// ErrNoPrompter is returned when a session has no terminal to ask on.
var ErrNoPrompter = errors.New("session has no terminal for prompts")

// Session is a registered Client Session.
type Session struct {
	ID     string
	Public ed25519.PublicKey
	Prompt Prompter // nil: every prompt is denied
	// Command, PID and Started name the session on its prompts.
	Command []string
	PID     int
	Started time.Time
}

// Registry holds the sessions currently attached to the coordinator. A
// session is forgotten when its CLI disconnects, which also ends every
// delegation it issued.
type Registry struct {
	mu sync.Mutex
	m  map[string]*Session
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[string]*Session{}} }

// ErrSessionExists is returned when a session id is registered twice.
var ErrSessionExists = errors.New("session already registered")

// Register adds s and returns the function that removes it.
func (r *Registry) Register(s *Session) (unregister func(), err error) {
	if len(s.Public) != ed25519.PublicKeySize {
		return nil, errors.New("session public key must be an Ed25519 key")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[s.ID]; ok {
		return nil, ErrSessionExists
	}
	r.m[s.ID] = s
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.m[s.ID] == s {
			delete(r.m, s.ID)
		}
	}, nil
}

// Lookup returns the session with id.
func (r *Registry) Lookup(id string) (*Session, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.m[id]
	return s, ok
}
