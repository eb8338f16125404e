package proposal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/engine/policycheck"
	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// maxReason bounds a decision's reason.
const maxReason = 1024

// livePolicy is the checker's view of the running sandbox: netd's
// active allowlist (the configuration's when netd does not answer, with
// netd's error), the profile's secrets' hosts and the server's live
// auto_approve.
func (m *Manager) livePolicy(ctx context.Context) (policycheck.Policy, error) {
	pol := policycheck.PolicyOf(m.o.Config, m.o.Profile)
	net, netErr := m.netPolicy(ctx)
	if netErr == nil {
		pol.Domains, pol.CIDRs = nil, nil
		for _, d := range net.AllowDomains {
			pol.Domains = append(pol.Domains, d.Pattern)
		}
		for _, c := range net.AllowEgress {
			pol.CIDRs = append(pol.CIDRs, c.Prefix)
		}
	}
	if m.o.Rules != nil {
		pol.AutoApprove = m.o.Rules.Rules()
	}
	return pol, netErr
}

func (m *Manager) netPolicy(ctx context.Context) (netpolicy.Policy, error) {
	if m.o.Netd == nil {
		return netpolicy.Policy{}, errors.New("no network sidecar")
	}
	st, err := m.o.Netd.Status(ctx)
	if err != nil {
		return netpolicy.Policy{}, err
	}
	return st.Policy.Active(time.Now()), nil
}

// policyHash is the SHA-256 of the active policy: netd's allowlist and
// the live auto_approve, as JSON.
func (m *Manager) policyHash(ctx context.Context) string {
	net, err := m.netPolicy(ctx)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	var rules [][]string
	if m.o.Rules != nil {
		rules = m.o.Rules.Rules()
	}
	b, _ := json.Marshal(struct {
		Net         netpolicy.Policy `json:"net"`
		AutoApprove [][]string       `json:"auto_approve"`
	}{net, rules})
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// settle records pr's decision once, applying an approval to the running
// sandbox, and audits it.
func (m *Manager) settle(pr *proposal, d Decision) {
	pr.once.Do(func() {
		ctx := context.WithoutCancel(m.base)
		m.mu.Lock()
		info := pr.info
		info.From, info.Reason = d.From, pr.reason
		m.mu.Unlock()
		if d.Action == ctl.ActionApprove {
			if err := m.apply(ctx, pr); err != nil {
				info.Status, info.Reason = ctl.ProposalDenied, "approved but not applied: "+err.Error()
			} else {
				info.Status = ctl.ProposalApproved
			}
		} else {
			info.Status = ctl.ProposalDenied
			if info.Reason == "" && d.Action != ctl.ActionDeny {
				info.Reason = d.Action // expired, withdrawn
			}
		}
		info.PolicyHash = m.policyHash(ctx)
		m.mu.Lock()
		pr.info = info
		m.decided = append(m.decided, info.ID)
		if len(m.decided) > maxDecided {
			delete(m.props, m.decided[0])
			m.decided = m.decided[1:]
		}
		m.mu.Unlock()
		m.auditDecision(ctx, info)
		close(pr.settled)
	})
	<-pr.settled
}

// apply puts pr's rule into the running sandbox's policy, after checking
// it again against the live policy: a candidate whose findings changed
// since it was shown is not the one decided on.
func (m *Manager) apply(ctx context.Context, pr *proposal) error {
	live, _ := m.livePolicy(ctx)
	again, err := check(live, pr.result.Kind, pr.target, pr.argv)
	if err != nil {
		return err
	}
	if hash(again) != pr.info.Hash {
		return errors.New("the candidate changed since it was shown (the live policy changed): propose it again")
	}
	if again.Refused() {
		return errors.New("the checker refuses it: " + findingsLine(refusals(findings(again))))
	}
	why := "proposal " + pr.info.ID + " approved"
	rule := again.Rule
	switch {
	case again.Kind == "exec":
		if m.o.Rules == nil {
			return errors.New("host escalation is off in this sandbox")
		}
		argv, err := config.ParseAutoApprove(rule)
		if err != nil {
			return err
		}
		m.o.Rules.AddRule(argv)
		return nil
	case m.o.Netd == nil:
		return errors.New("no network sidecar")
	case !strings.Contains(rule, "/") && !strings.HasPrefix(rule, "*."):
		// An exact name: netd allows it and releases the lookups it
		// holds for the user's decision.
		return m.o.Netd.Decide(ctx, rule, true, why)
	}
	_, err = m.o.Netd.Allow(ctx, rule, 0, why)
	return err
}

// Answer decides proposal a.ID from `lazaret proposals approve|deny`;
// from names the CLI. An approval must name the candidate's hash.
func (m *Manager) Answer(a ctl.ProposalAnswer, from string) (ctl.Proposal, error) {
	if a.Action != ctl.ActionApprove && a.Action != ctl.ActionDeny {
		return ctl.Proposal{}, ctl.Errorf(ctl.ErrBadRequest.Code, "proposals answer: action %q: want %q or %q", a.Action, ctl.ActionApprove, ctl.ActionDeny)
	}
	m.mu.Lock()
	pr, ok := m.props[a.ID]
	var err error
	switch {
	case !ok:
		err = ctl.Errorf(ctl.ErrUnknownRequest.Code, "no proposal %q in this sandbox", a.ID)
	case pr.info.Status != ctl.ProposalPending:
		err = ctl.Errorf(ctl.ErrAnsweredFirst.Code, "proposal %s was already decided (%s) by %s", a.ID, pr.info.Status, pr.info.From)
	case a.Action == ctl.ActionApprove && a.Hash != pr.info.Hash:
		err = ctl.Errorf(ctl.ErrStaleRequest.Code, "proposal %s: the candidate is not the one whose hash is %q; show it again", a.ID, a.Hash)
	default:
		pr.reason = visible.Line(a.Reason[:min(len(a.Reason), maxReason)])
	}
	m.mu.Unlock()
	if err != nil {
		return ctl.Proposal{}, err
	}
	if !m.o.Registry.Decide(pr.pend, a.Action, from) {
		<-pr.settled
		p := m.snapshot(pr)
		return ctl.Proposal{}, ctl.Errorf(ctl.ErrAnsweredFirst.Code, "proposal %s was already decided (%s) by %s", a.ID, p.Status, p.From)
	}
	m.settle(pr, outcome(pr.pend))
	return m.snapshot(pr), nil
}

// outcome is p's decision (p is done).
func outcome(p Pending) Decision {
	a, f := p.Outcome()
	return Decision{a, f}
}

// Denials implements eschost.ProposalHandler: netd's denial counters,
// the most recent first, each destination escaped.
func (m *Manager) Denials(ctx context.Context) ([]string, error) {
	if m.o.Netd == nil {
		return nil, errors.New("no network sidecar this process can read")
	}
	st, err := m.o.Netd.Status(ctx)
	if err != nil {
		return nil, errors.New("the network sidecar does not answer")
	}
	ds := st.Denials
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].Last.After(ds[j].Last) })
	out := make([]string, 0, min(len(ds), 100))
	for _, d := range ds[:min(len(ds), 100)] {
		out = append(out, fmt.Sprintf("%s\t%d\t%s", visible.Line(d.Dest), d.Count, d.Last.UTC().Format(time.RFC3339)))
	}
	return out, nil
}

// auditProposal records a proposal as checked; outcome says what became
// of it at once ("" for pending or auto).
func (m *Manager) auditProposal(ctx context.Context, p ctl.Proposal, outcome string) {
	fs, _ := json.Marshal(p.Findings)
	if outcome == "" {
		outcome = "pending"
		if p.Status == "" {
			outcome = "auto"
		}
	}
	m.audit(ctx, p.Session, map[string]string{"change": "proposal", "proposal": p.ID, "kind": p.Kind, "key": p.Key,
		"rule": p.Rule, "port": strconv.Itoa(p.Port), "target": p.Target, "why": p.Why, "mode": m.o.Mode,
		"checker_version": strconv.Itoa(p.CheckerVersion), "findings": string(fs), "hash": p.Hash, "outcome": outcome})
}

// auditDecision records a decision: who (terminal, CLI pid, auto), why,
// and the policy's hash after it.
func (m *Manager) auditDecision(ctx context.Context, p ctl.Proposal) {
	m.audit(ctx, p.Session, map[string]string{"change": "proposal decision", "proposal": p.ID, "key": p.Key, "rule": p.Rule,
		"hash": p.Hash, "decision": p.Status, "from": p.From, "reason": p.Reason, "policy_hash": p.PolicyHash})
}

func (m *Manager) audit(ctx context.Context, session string, fields map[string]string) {
	for k, v := range fields {
		if v == "" {
			delete(fields, k)
		}
	}
	if m.o.Audit == nil {
		return
	}
	e := audit.Entry{Kind: audit.KindPolicyChange, Profile: m.o.Profile.Name, Session: session, Fields: fields}
	if _, err := m.o.Audit(ctx, e); err != nil {
		m.o.Log.Error("audit of a proposal", "err", err)
	}
}
