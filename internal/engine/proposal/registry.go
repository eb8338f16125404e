package proposal

import (
	"crypto/rand"
	"encoding/hex"
	"sync"

	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// Registry holds the proposals that wait for a human: the coordinator's
// approvals hub (every pending request of the sandbox, `lazaret
// proposals` and `lazaret approvals`), or Local in lazaret-kube (the
// session's terminal alone decides).
type Registry interface {
	// Add registers r (its ID is chosen here).
	Add(r ctl.PendingRequest) Pending
	// Decide ends p with action (ctl.ActionApprove, ctl.ActionDeny…)
	// unless it was decided already; it reports whether this is the
	// decision (the first answer wins).
	Decide(p Pending, action, from string) bool
}

// Pending is one registered proposal.
type Pending interface {
	PendingID() string
	// Done is closed once it is decided; Outcome is then the decision.
	Done() <-chan struct{}
	Outcome() (action, from string)
}

// Decision is how a proposal ended: its action and who decided.
type Decision struct {
	Action string
	From   string
}

// Local is a Registry of one process (lazaret-kube's session).
type Local struct {
	mu   sync.Mutex
	used map[string]bool
}

// NewLocal returns an empty Local registry.
func NewLocal() *Local { return &Local{used: map[string]bool{}} }

type localPending struct {
	id   string
	done chan struct{}
	d    Decision
	once sync.Once
}

func (p *localPending) PendingID() string              { return p.id }
func (p *localPending) Done() <-chan struct{}          { return p.done }
func (p *localPending) Outcome() (action, from string) { <-p.done; return p.d.Action, p.d.From }

// Add implements Registry.
func (l *Local) Add(ctl.PendingRequest) Pending {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		if !l.used[id] {
			l.used[id] = true
			return &localPending{id: id, done: make(chan struct{})}
		}
	}
}

// Decide implements Registry.
func (l *Local) Decide(p Pending, action, from string) bool {
	lp, ok := p.(*localPending)
	if !ok {
		return false
	}
	first := false
	lp.once.Do(func() {
		lp.d, first = Decision{action, from}, true
		close(lp.done)
	})
	return first
}
