package eschost

import (
	"crypto/ed25519"
	"errors"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// ErrNoPrompter is returned when a session has no terminal to ask on.
var ErrNoPrompter = errors.New("session has no terminal for prompts")

// Session is a registered Client Session.
type Session struct {
	ID     string
	Public ed25519.PublicKey
	Prompt escprompt.Prompter // nil: every prompt is denied
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
