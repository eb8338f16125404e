// Package proposal is the host's side of the policy proposal loop
// (docs/POLICY.md), shared by the coordinator (internal/coordinator/
// proposals) and lazaret-kube: the agent proposes a rule through Host
// Escalation (`lazaret-escalate --propose`), the deterministic checker
// (internal/engine/policycheck) reviews it against the live policy, and
// [policy] proposals decides what happens: "off" refuses it, a finding of
// severity refuse refuses it whatever the mode, "auto" applies a
// candidate with nothing above info at once, anything else waits for the
// human in a Registry (the coordinator's approvals hub, listed by
// `lazaret proposals`), shown on the proposing session's terminal. An approval applies the rule to the running
// sandbox at once (netd's policy, releasing a held lookup of the name;
// the escalation server's auto_approve); every proposal and decision,
// with the checker's version, findings and the resulting policy's hash,
// goes into the audit chain.
package proposal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/policycheck"
	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
	"github.com/lazaret-dev/lazaret/internal/wire/escwire"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// Bounds: the proposals waiting for the human at once, and the decided
// ones remembered (for --wait and `lazaret proposals`).
const (
	MaxPending = 16
	maxDecided = 256
)

// Rules is the escalation server's live auto_approve (eschost.Policy).
type Rules interface {
	Rules() [][]string
	AddRule(argv []string) bool
}

// Netd is what the manager asks of the sandbox's network sidecar
// (netdapi.Client, or lazaret-kube's exec into the pod's netd).
type Netd interface {
	Status(ctx context.Context) (*netdapi.Status, error)
	Allow(ctx context.Context, target string, d time.Duration, reason string) (*netdapi.Status, error)
	Decide(ctx context.Context, name string, allow bool, reason string) error
}

// Shower shows a request on its session's terminal only (the escalation
// component's prompter): the hub is the manager's.
type Shower interface {
	Show(ctx context.Context, r escprompt.PromptRequest) (escprompt.Answer, error)
}

// Options configure a Manager.
type Options struct {
	// Mode is [policy] proposals.
	Mode    string
	Config  *config.Config
	Profile *config.Profile
	// Workspace names the sandbox in `lazaret proposals`.
	Workspace string
	Registry  Registry
	// RequireTerminal refuses a proposal from a session without a
	// prompter (lazaret-kube: nobody else could decide it).
	RequireTerminal bool
	// Netd is the sandbox's netd (its live policy, allow, decide): its
	// control socket locally, an exec into the pod's netd container on
	// Kubernetes. Nil: network proposals are refused.
	Netd Netd
	// NetLimit, when set, says why this backend cannot apply a network
	// rule the checker let through ("" when it can): on Kubernetes an
	// address or CIDR (the IP level is the pod's NetworkPolicy), or a
	// name while that NetworkPolicy opens no public address. Asked after
	// the checker, so its refusals hold exactly as locally.
	NetLimit func(ctx context.Context, rule string) string
	Rules    Rules
	// Audit appends to the audit chain (nil: nothing is audited).
	Audit func(context.Context, audit.Entry) (uint64, error)
	Log   *slog.Logger
}

// Manager holds one sandbox's proposals. It implements
// eschost.ProposalHandler.
type Manager struct {
	o Options
	// base outlives each request: a pending proposal waits for its human
	// after the agent's --propose has returned.
	base context.Context

	mu      sync.Mutex
	props   map[string]*proposal
	decided []string // decided ids, oldest first
}

// proposal is one registered proposal.
type proposal struct {
	info   ctl.Proposal
	result policycheck.Result
	// target and argv are the agent's words, checked again at approval.
	target  string
	argv    []string
	pend    Pending // nil for one decided at once (auto)
	reason  string  // the CLI's --reason, set before its decision
	once    sync.Once
	settled chan struct{}
}

// New returns the manager; base bounds the waits of pending proposals
// (the coordinator's life).
func New(base context.Context, o Options) *Manager {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Mode == "" {
		o.Mode = config.ProposalsManual
	}
	return &Manager{o: o, base: base, props: map[string]*proposal{}}
}

var _ eschost.ProposalHandler = (*Manager)(nil)

// Propose implements eschost.ProposalHandler.
func (m *Manager) Propose(ctx context.Context, p eschost.Proposal) eschost.ProposalReply {
	shown := p.Target
	if p.Kind == "exec" {
		shown = fmt.Sprintf("%q", p.Argv)
	}
	if why := m.notTaken(p); why != "" {
		m.auditProposal(ctx, ctl.Proposal{Kind: p.Kind, Target: visible.Line(p.Target), Why: visible.Line(p.Why), Session: sessionID(p.Session),
			CheckerVersion: policycheck.Version}, "refused: "+why)
		return eschost.ProposalReply{Status: eschost.ProposalRefused, Message: why}
	}
	live, netErr := m.livePolicy(ctx)
	res, err := check(live, p.Kind, p.Target, p.Argv)
	info := ctl.Proposal{Kind: p.Kind, Target: visible.Line(shown), Why: visible.Line(p.Why), Session: sessionID(p.Session),
		CheckerVersion: policycheck.Version, Created: time.Now().UTC()}
	if err == nil && p.Kind == escwire.ProposeNet && netErr != nil {
		// Nothing could apply it, and the checker did not see the live
		// allowlist.
		m.o.Log.Warn("network proposal: the sidecar does not answer", "err", netErr)
		err = errors.New("the sandbox's network sidecar does not answer: nothing could apply a network rule now")
	}
	if err != nil {
		m.auditProposal(ctx, info, "refused: "+err.Error())
		return eschost.ProposalReply{Status: eschost.ProposalRefused, Message: visible.Line(err.Error())}
	}
	info.Key, info.Rule, info.Port, info.Findings, info.Hash = key(res), res.Rule, res.Port, findings(res), hash(res)
	limit := ""
	if p.Kind == escwire.ProposeNet && m.o.Mode != config.ProposalsOff && !res.Refused() {
		limit = m.netLimit(ctx, res.Rule)
	}
	switch {
	case m.o.Mode == config.ProposalsOff:
		m.auditProposal(ctx, info, "refused: [policy] proposals = \"off\"")
		return eschost.ProposalReply{Status: eschost.ProposalRefused, Message: `this sandbox takes no proposals ([policy] proposals = "off")`}
	case res.Refused():
		m.auditProposal(ctx, info, "refused by the checker")
		return eschost.ProposalReply{Status: eschost.ProposalRefused, Message: findingsLine(refusals(info.Findings))}
	case limit != "":
		m.auditProposal(ctx, info, "refused: "+limit)
		return eschost.ProposalReply{Status: eschost.ProposalRefused, Message: limit}
	case m.o.Mode == config.ProposalsAuto && res.Clean():
		return m.auto(ctx, info, res, p)
	}
	return m.hold(ctx, info, res, p)
}

// notTaken says why this manager cannot take p at all: a network rule
// without a netd to apply it to, a proposal nobody could decide.
func (m *Manager) notTaken(p eschost.Proposal) string {
	if p.Kind == escwire.ProposeNet && m.o.Netd == nil {
		return "this backend cannot change the sandbox's network policy while it runs: the user adds the name to the profile's allow_domains (or allow_egress) and starts it again"
	}
	if m.o.RequireTerminal && (p.Session == nil || p.Session.Prompt == nil) {
		return "no terminal to ask: run the agent in a session with a terminal (shell, or exec -t)"
	}
	return ""
}

// netLimit is Options.NetLimit's answer for rule ("" without one).
func (m *Manager) netLimit(ctx context.Context, rule string) string {
	if m.o.NetLimit == nil {
		return ""
	}
	return m.o.NetLimit(ctx, rule)
}

// refusals are the findings of severity refuse.
func refusals(fs []ctl.ProposalFinding) []ctl.ProposalFinding {
	var out []ctl.ProposalFinding
	for _, f := range fs {
		if f.Severity == policycheck.Refuse.String() {
			out = append(out, f)
		}
	}
	return out
}

func sessionID(s *eschost.Session) string {
	if s == nil {
		return ""
	}
	return s.ID
}

// auto applies a clean candidate at once ([policy] proposals = "auto").
func (m *Manager) auto(ctx context.Context, info ctl.Proposal, res policycheck.Result, p eschost.Proposal) eschost.ProposalReply {
	info.ID = m.newID()
	m.auditProposal(ctx, info, "")
	pr := &proposal{info: info, result: res, target: p.Target, argv: p.Argv, settled: make(chan struct{})}
	m.mu.Lock()
	m.props[info.ID] = pr
	m.mu.Unlock()
	m.settle(pr, Decision{Action: ctl.ActionApprove, From: "auto ([policy] proposals = \"auto\": no finding above info)"})
	out := m.snapshot(pr)
	if out.Status != ctl.ProposalApproved {
		return eschost.ProposalReply{ID: info.ID, Status: eschost.ProposalDenied, Message: "approved but not applied: " + out.Reason}
	}
	return eschost.ProposalReply{ID: info.ID, Status: eschost.ProposalApproved,
		Message: fmt.Sprintf("proposal %s applied at once (no finding above info): %s %s", info.ID, info.Key, info.Rule)}
}

// hold registers the candidate with the hub, shows it on its session's
// terminal and returns; the decision comes from the terminal or
// `lazaret proposals`.
func (m *Manager) hold(ctx context.Context, info ctl.Proposal, res policycheck.Result, p eschost.Proposal) eschost.ProposalReply {
	m.mu.Lock()
	n := 0
	for _, q := range m.props {
		if q.info.Status == ctl.ProposalPending {
			n++
		}
	}
	m.mu.Unlock()
	if n >= MaxPending {
		m.auditProposal(ctx, info, fmt.Sprintf("refused: %d proposals already wait for the user", n))
		return eschost.ProposalReply{Status: eschost.ProposalRefused, Message: fmt.Sprintf("%d proposals already wait for the user", n)}
	}
	info.Status = ctl.ProposalPending
	pend := m.o.Registry.Add(ctl.PendingRequest{Kind: ctl.RequestProposal, Session: info.Session,
		Detail: escprompt.Describe(promptRequest(info, m.o.Profile.Name)), Summary: fmt.Sprintf("add %s to %s", info.Rule, info.Key), Hash: info.Hash})
	info.ID = pend.PendingID()
	pr := &proposal{info: info, result: res, target: p.Target, argv: p.Argv, pend: pend, settled: make(chan struct{})}
	m.mu.Lock()
	m.props[info.ID] = pr
	m.mu.Unlock()
	m.auditProposal(ctx, info, "")
	go m.watch(pr, p.Session)
	return eschost.ProposalReply{ID: info.ID, Status: eschost.ProposalPending, Message: fmt.Sprintf(
		"proposal %s (%s %s) awaits the user's decision; lazaret-escalate --wait %s waits for it", info.ID, info.Key, info.Rule, info.ID)}
}

// watch shows pr on its session's terminal and settles it once the hub
// has its decision, whoever made it.
func (m *Manager) watch(pr *proposal, sess *eschost.Session) {
	ctx, cancel := context.WithCancel(m.base)
	defer cancel()
	if sh, ok := showerOf(sess); ok {
		go func() {
			a, err := sh.Show(ctx, promptRequest(pr.info, m.o.Profile.Name))
			if err != nil || ctx.Err() != nil {
				return // withdrawn, or the session ended: `lazaret proposals` still can
			}
			action := ctl.ActionDeny
			if a.Action == escprompt.Approve && a.Argv == nil {
				action = ctl.ActionApprove // an edited command is no answer to this candidate
			}
			m.o.Registry.Decide(pr.pend, action, "terminal of session "+sess.ID)
		}()
	}
	select {
	case <-pr.pend.Done():
		m.settle(pr, outcome(pr.pend))
	case <-m.base.Done():
	}
}

// showerOf is how to show a proposal on s's terminal: its prompter's Show
// (the coordinator's, which asks the terminal only), else its prompter
// itself (lazaret-kube's, the terminal's own).
func showerOf(s *eschost.Session) (Shower, bool) {
	if s == nil || s.Prompt == nil {
		return nil, false
	}
	if sh, ok := s.Prompt.(Shower); ok {
		return sh, true
	}
	return prompterShower{s.Prompt}, true
}

type prompterShower struct{ p escprompt.Prompter }

func (p prompterShower) Show(ctx context.Context, r escprompt.PromptRequest) (escprompt.Answer, error) {
	return p.p.Prompt(ctx, r)
}

// newID is 8 random hex characters not in use (an auto-approved
// proposal's; a pending one has the hub's).
func (m *Manager) newID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		if _, used := m.props[id]; !used {
			return id
		}
	}
}

// snapshot is pr's info under the lock.
func (m *Manager) snapshot(pr *proposal) ctl.Proposal {
	m.mu.Lock()
	defer m.mu.Unlock()
	return pr.info
}

// Target names the sandbox and the mode, for a listing.
func (m *Manager) Target() (profile, workspace, mode string) {
	return m.o.Profile.Name, m.o.Workspace, m.o.Mode
}

// List is every remembered proposal, oldest first.
func (m *Manager) List() []ctl.Proposal {
	m.mu.Lock()
	out := make([]ctl.Proposal, 0, len(m.props))
	for _, p := range m.props {
		out = append(out, p.info)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// Get returns proposal id.
func (m *Manager) Get(id string) (ctl.Proposal, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.props[id]; ok {
		return p.info, nil
	}
	return ctl.Proposal{}, ctl.Errorf(ctl.ErrUnknownRequest.Code, "no proposal %q in this sandbox", id)
}

// Wait implements eschost.ProposalHandler.
func (m *Manager) Wait(ctx context.Context, id string) (eschost.ProposalReply, error) {
	m.mu.Lock()
	pr, ok := m.props[id]
	m.mu.Unlock()
	if !ok {
		return eschost.ProposalReply{}, fmt.Errorf("no proposal %s in this sandbox", id)
	}
	select {
	case <-pr.settled:
	case <-ctx.Done():
		return eschost.ProposalReply{}, ctx.Err()
	}
	info := m.snapshot(pr)
	if info.Status == ctl.ProposalApproved {
		return eschost.ProposalReply{ID: id, Status: eschost.ProposalApproved, Message: fmt.Sprintf("proposal %s approved: %s %s is in force", id, info.Key, info.Rule)}, nil
	}
	msg := fmt.Sprintf("proposal %s denied", id)
	if info.Reason != "" {
		msg += ": " + info.Reason
	}
	return eschost.ProposalReply{ID: id, Status: eschost.ProposalDenied, Message: msg}, nil
}
