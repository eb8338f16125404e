// Package approvals is the hub of pending requests of the process that
// holds a sandbox's prompts (the coordinator; on Kubernetes each
// lazaret-kube session process): every prompt of the sandbox (an escalation, a denied DNS name) is registered
// here with a short id while it waits for its human. It is shown on the
// asking session's terminal as before and, with [escalation] answer_from
// = "any", may be answered by `lazaret approvals answer` from any
// terminal of the same user; the first answer wins and the other side is
// withdrawn. Every registration and decision is an event
// (approval.pending, approval.decided) on the sandbox's event stream.
package approvals

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/events"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// maxDecided bounds the answered requests remembered, so that a late
// answer is told who answered first rather than "unknown id".
const maxDecided = 256

// Decision is how a pending request ended.
type Decision struct {
	// Action is ctl.ActionApprove, ctl.ActionDeny, ctl.DecisionExpired or
	// ctl.DecisionWithdrawn.
	Action string
	// From says where the answer came from, for the event and the audit
	// trail: "terminal of session …", "lazaret approvals (pid N, uid U)",
	// "timeout".
	From string
	// Remote: it came through the hub (`lazaret approvals answer`), not
	// from the session's own terminal.
	Remote bool
	At     time.Time
}

// Pending is one request awaiting its answer.
type Pending struct {
	ctl.PendingRequest
	done     chan struct{}
	decision Decision
}

// Done is closed once the request is decided.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Decision is how it ended (valid once Done is closed).
func (p *Pending) Decision() Decision {
	<-p.done
	return p.decision
}

// Hub holds the pending requests of one coordinator.
type Hub struct {
	events     *events.Hub
	answerFrom string
	now        func() time.Time

	mu      sync.Mutex
	pending map[string]*Pending
	decided map[string]Decision
	order   []string // decided ids, oldest first
}

// New returns the hub; ev receives its events (nil: none), answerFrom is
// [escalation] answer_from.
func New(ev *events.Hub, answerFrom string) *Hub {
	if answerFrom == "" {
		answerFrom = config.AnswerFromSession
	}
	return &Hub{events: ev, answerFrom: answerFrom, now: time.Now, pending: map[string]*Pending{}, decided: map[string]Decision{}}
}

// AnswerFrom is the answer_from setting.
func (h *Hub) AnswerFrom() string {
	if h == nil {
		return ""
	}
	return h.answerFrom
}

// AnswerElsewhere reports whether a request may be answered from another
// terminal (answer_from = "any"); never without a hub.
func (h *Hub) AnswerElsewhere() bool { return h != nil && h.answerFrom == config.AnswerFromAny }

// newID is 8 random hex characters, not in use.
func (h *Hub) newID() string {
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		if _, used := h.pending[id]; !used {
			if _, used := h.decided[id]; !used {
				return id
			}
		}
	}
}

// Add registers r (its ID, Created and AnswerFrom are set here) and
// publishes approval.pending.
func (h *Hub) Add(r ctl.PendingRequest) *Pending {
	h.mu.Lock()
	r.ID, r.Created, r.AnswerFrom = h.newID(), h.now().UTC(), h.answerFrom
	p := &Pending{PendingRequest: r, done: make(chan struct{})}
	h.pending[r.ID] = p
	h.mu.Unlock()
	h.publish(ctl.Event{Kind: ctl.EventApprovalPending, Session: r.Session, Request: r.ID, RequestKind: r.Kind, Detail: r.Summary})
	return p
}

// Decide ends p with d unless it was decided already; it reports whether
// d is the decision (the first answer wins) and publishes
// approval.decided.
func (h *Hub) Decide(p *Pending, d Decision) bool {
	h.mu.Lock()
	if h.pending[p.ID] != p {
		h.mu.Unlock()
		return false
	}
	delete(h.pending, p.ID)
	d.At = h.now().UTC()
	p.decision = d
	h.decided[p.ID] = d
	h.order = append(h.order, p.ID)
	if len(h.order) > maxDecided {
		delete(h.decided, h.order[0])
		h.order = h.order[1:]
	}
	close(p.done)
	h.mu.Unlock()
	h.publish(ctl.Event{Kind: ctl.EventApprovalDecided, Session: p.Session, Request: p.ID, RequestKind: p.Kind,
		Decision: d.Action, From: d.From, Detail: p.Summary})
	return true
}

// List returns the pending requests, oldest first.
func (h *Hub) List() []ctl.PendingRequest {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	out := make([]ctl.PendingRequest, 0, len(h.pending))
	for _, p := range h.pending {
		out = append(out, p.PendingRequest)
	}
	h.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// PendingOf returns the ids of session's pending requests.
func (h *Hub) PendingOf(session string) []string {
	var ids []string
	for _, r := range h.List() {
		if r.Session == session {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// Get returns the pending request id, or ctl.ErrUnknownRequest (or
// ctl.ErrAnsweredFirst for one answered a short while ago).
func (h *Hub) Get(id string) (ctl.PendingRequest, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p, ok := h.pending[id]; ok {
		return p.PendingRequest, nil
	}
	return ctl.PendingRequest{}, h.goneErr(id)
}

// goneErr says why id is not pending; h.mu is held.
func (h *Hub) goneErr(id string) error {
	if d, ok := h.decided[id]; ok {
		return ctl.Errorf(ctl.ErrAnsweredFirst.Code, "request %s was already decided (%s) by the %s at %s first",
			id, d.Action, d.From, d.At.Local().Format(time.TimeOnly))
	}
	return ctl.Errorf(ctl.ErrUnknownRequest.Code, "no pending request %q in this sandbox", id)
}

// Answer decides request a.ID from `lazaret approvals answer`; from names
// the answering CLI. It is refused (a typed *ctl.Error) when
// answer_from is "session", the id is unknown or decided already, or,
// for an approval (or a denial that names one), the hash is not the
// request's.
func (h *Hub) Answer(a ctl.ApprovalAnswer, from string) (Decision, error) {
	if a.Action != ctl.ActionApprove && a.Action != ctl.ActionDeny {
		return Decision{}, ctl.Errorf(ctl.ErrBadRequest.Code, "approvals answer: action %q: want %q or %q", a.Action, ctl.ActionApprove, ctl.ActionDeny)
	}
	h.mu.Lock()
	p, ok := h.pending[a.ID]
	var err error
	switch {
	case !ok:
		err = h.goneErr(a.ID)
	case !h.AnswerElsewhere():
		err = ctl.Errorf(ctl.ErrAnswerNotAllowed.Code, "request %s may be answered only on the terminal of its session ([escalation] answer_from = %q; set answer_from = %q to answer from any terminal of this user)",
			a.ID, h.answerFrom, config.AnswerFromAny)
	case (a.Action == ctl.ActionApprove || a.Hash != "") && a.Hash != p.Hash:
		// An approval must name the hash; a denial may leave it out, but
		// one that names a hash is bound to it too.
		err = ctl.Errorf(ctl.ErrStaleRequest.Code, "request %s: the request changed (its hash is not %q); show it again", a.ID, a.Hash)
	}
	h.mu.Unlock()
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Action: a.Action, From: from, Remote: true}
	if !h.Decide(p, d) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return Decision{}, h.goneErr(a.ID)
	}
	return p.decision, nil
}

// CLIFrom names an answering CLI by its peer credentials.
func CLIFrom(pid, uid int) string {
	return fmt.Sprintf("lazaret approvals (pid %d, uid %d)", pid, uid)
}

func (h *Hub) publish(e ctl.Event) {
	if h.events != nil {
		h.events.Publish(e)
	}
}
