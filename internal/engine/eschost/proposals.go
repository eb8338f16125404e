package eschost

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/wire/escwire"
)

// Proposal is a verified request of the proposal loop (docs/POLICY.md):
// a rule the agent proposes, for the coordinator (or lazaret-kube) to
// check, refuse, apply or hold for its human.
type Proposal struct {
	RequestID string
	Session   *Session
	Profile   string
	// Kind is escwire.ProposeNet (Target is HOST[:PORT]) or
	// escwire.ProposeExec (Argv is the auto_approve entry's words).
	Kind   string
	Target string
	Argv   []string
	// Why is the agent's reason (hostile text: shown only escaped).
	Why string
}

// Proposal statuses (ProposalReply.Status).
const (
	ProposalRefused  = "refused"
	ProposalPending  = "pending"
	ProposalApproved = "approved"
	ProposalDenied   = "denied"
)

// ProposalReply is what the agent is told.
type ProposalReply struct {
	// ID is the proposal's id (`lazaret proposals show ID`); empty for a
	// proposal refused before it was registered.
	ID     string
	Status string
	// Message is one line for the agent.
	Message string
}

// ProposalHandler is the host's side of the proposal loop, which the
// coordinator fills (internal/engine/proposal). The server has
// verified each call's request (mTLS, session, delegation, signature,
// replay) and rate-limited its session's proposals.
type ProposalHandler interface {
	// Propose checks p against the live policy and refuses it, applies
	// it ([policy] proposals = "auto" and nothing found) or holds it for
	// the human; it returns at once.
	Propose(ctx context.Context, p Proposal) ProposalReply
	// Wait returns once proposal id is decided (or ctx ends); an unknown
	// id is an error.
	Wait(ctx context.Context, id string) (ProposalReply, error)
	// Denials are the sandbox's recent network denials, one line each
	// (already escaped for display).
	Denials(ctx context.Context) ([]string, error)
}

// Rate of proposals per session: a burst of ProposalBurst, then one per
// ProposalEvery.
const (
	ProposalBurst = 5
	ProposalEvery = 10 * time.Second
	// maxBuckets bounds the sessions remembered; full buckets are
	// forgotten first.
	maxBuckets = 1024
)

// StageRate is the rejection stage of a proposal over its session's rate.
const StageRate = "rate"

// rateLimiter is a token bucket per session.
type rateLimiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// take spends one token of session's bucket at now; wait is how long
// until the next one when there is none.
func (l *rateLimiter) take(session string, now time.Time) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b := l.buckets[session]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			l.forgetFull(now)
		}
		b = &bucket{tokens: ProposalBurst, last: now}
		l.buckets[session] = b
	}
	if now.After(b.last) {
		b.tokens = min(ProposalBurst, b.tokens+float64(now.Sub(b.last))/float64(ProposalEvery))
		b.last = now
	}
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) * float64(ProposalEvery)).Round(time.Second)
	}
	b.tokens--
	return true, 0
}

// forgetFull drops the buckets that have refilled (l.mu held), or all of
// them if none has.
func (l *rateLimiter) forgetFull(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+float64(now.Sub(b.last))/float64(ProposalEvery) >= ProposalBurst {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= maxBuckets {
		clear(l.buckets)
	}
}

// serveLoop answers a verified request of the proposal loop.
func (s *Server) serveLoop(ctx context.Context, req *escwire.Request, sess *Session, out *frameWriter) {
	h := s.cfg.Proposals
	if h == nil {
		s.reject(ctx, req, &Rejection{StagePolicy, "this sandbox takes no proposals"})
		out.send(escwire.Frame{Type: escwire.FrameDenied, Message: "denied: this sandbox takes no policy proposals"})
		return
	}
	switch req.Kind {
	case escwire.KindPropose:
		if ok, wait := s.limit.take(sess.ID, s.cfg.Now()); !ok {
			s.reject(ctx, req, &Rejection{StageRate, fmt.Sprintf("proposal %s %q: over %d at once and 1 per %v", req.Proposal, req.Target, ProposalBurst, ProposalEvery)})
			out.send(escwire.Frame{Type: escwire.FrameDenied, Message: fmt.Sprintf(
				"denied: too many proposals (at most %d at once, then 1 every %v); try again in %v", ProposalBurst, ProposalEvery, max(wait, time.Second))})
			return
		}
		r := h.Propose(ctx, Proposal{RequestID: req.RequestID, Session: sess, Profile: req.Profile, Kind: req.Proposal,
			Target: req.Target, Argv: req.Argv, Why: req.Justification})
		s.proposalReply(r, out)
	case escwire.KindWait:
		r, err := h.Wait(ctx, req.ProposalID)
		if err != nil {
			out.send(escwire.Frame{Type: escwire.FrameError, Message: err.Error()})
			return
		}
		s.proposalReply(r, out)
	case escwire.KindDenials:
		lines, err := h.Denials(ctx)
		if err != nil {
			out.send(escwire.Frame{Type: escwire.FrameError, Message: err.Error()})
			return
		}
		for _, l := range lines {
			out.send(escwire.Frame{Type: escwire.FrameStdout, Data: []byte(l + "\n")})
		}
		out.send(escwire.Frame{Type: escwire.FrameExit})
	}
}

// proposalReply tells the agent r: a refusal is a denial (exit 126), a
// registered proposal prints its id on stdout and exits 0 (pending or
// approved) or 1 (denied), its message on stderr.
func (s *Server) proposalReply(r ProposalReply, out *frameWriter) {
	if r.Status == ProposalRefused {
		out.send(escwire.Frame{Type: escwire.FrameDenied, Message: "refused: " + r.Message})
		return
	}
	if r.ID != "" {
		out.send(escwire.Frame{Type: escwire.FrameStdout, Data: []byte(r.ID + "\n")})
	}
	if r.Message != "" {
		out.send(escwire.Frame{Type: escwire.FrameStderr, Data: []byte("lazaret-escalate: " + r.Message + "\n")})
	}
	code := 0
	if r.Status == ProposalDenied {
		code = 1
	}
	out.send(escwire.Frame{Type: escwire.FrameExit, Code: code})
}
