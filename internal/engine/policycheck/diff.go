package policycheck

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// Change is one thing a configuration change opens or closes.
type Change struct {
	// Profile is "" for a global setting.
	Profile string `json:"profile,omitempty"`
	Key     string `json:"key"`
	// Opens: the new configuration allows what the old did not.
	Opens bool   `json:"opens"`
	Rule  string `json:"rule"`
	// Check is the checker's result for what is opened.
	Check *Result `json:"check,omitempty"`
}

// Diff lists what going from old to new opens and closes: each profile's
// allowed names and networks (global entries merged in, as a sandbox
// gets them), auto_approve, and the escalation settings that widen who
// decides. Profiles only in new open everything they allow; profiles
// only in old close theirs. The order is fixed: profiles by name, then
// keys, then rules.
func Diff(old, new *config.Config) []Change {
	var out []Change
	names := append(old.ProfileNames(), new.ProfileNames()...)
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		op, np := old.Profiles[name], new.Profiles[name]
		out = append(out, profileDiff(name, op, np, PolicyOf(new, np))...)
	}
	oldAuto, newAuto := entries(old.Escalation.AutoApprove), entries(new.Escalation.AutoApprove)
	for _, e := range added(oldAuto, newAuto) {
		r, err := CheckExec(PolicyOf(old, nil), e)
		if err != nil {
			r = Result{Version: Version, Kind: "exec", Rule: e}
		}
		out = append(out, Change{Key: "escalation.auto_approve", Opens: true, Rule: e, Check: &r})
	}
	for _, e := range added(newAuto, oldAuto) {
		out = append(out, Change{Key: "escalation.auto_approve", Rule: e})
	}
	out = append(out, escalationDiff(old.Escalation, new.Escalation)...)
	return out
}

func profileDiff(name string, op, np *config.Profile, pol Policy) []Change {
	var oldD, newD, oldC, newC []string
	if op != nil {
		oldD, oldC = op.AllowDomains, prefixes(op.AllowEgress)
	}
	if np != nil {
		newD, newC = np.AllowDomains, prefixes(np.AllowEgress)
	}
	var out []Change
	for _, k := range []struct {
		key      string
		old, new []string
	}{{"allow_domains", oldD, newD}, {"allow_egress", oldC, newC}} {
		for _, rule := range added(k.old, k.new) {
			r, err := CheckNet(without(pol, rule), rule)
			c := Change{Profile: name, Key: k.key, Opens: true, Rule: rule}
			if err == nil {
				c.Check = &r
			}
			out = append(out, c)
		}
		for _, rule := range added(k.new, k.old) {
			out = append(out, Change{Profile: name, Key: k.key, Rule: rule})
		}
	}
	return out
}

// without is pol less rule, so that a rule is not "already allowed" by
// itself.
func without(pol Policy, rule string) Policy {
	pol.Domains = slices.DeleteFunc(slices.Clone(pol.Domains), func(d string) bool { return d == rule })
	pol.CIDRs = slices.DeleteFunc(slices.Clone(pol.CIDRs), func(c netip.Prefix) bool { return c.String() == rule })
	return pol
}

func escalationDiff(old, new config.Escalation) []Change {
	var out []Change
	if !old.Enabled && new.Enabled {
		out = append(out, Change{Key: "escalation.enabled", Opens: true, Rule: "true"})
	} else if old.Enabled && !new.Enabled {
		out = append(out, Change{Key: "escalation.enabled", Rule: "false"})
	}
	if old.AnswerFrom != new.AnswerFrom {
		out = append(out, Change{Key: "escalation.answer_from", Opens: new.AnswerFrom == config.AnswerFromAny,
			Rule: fmt.Sprintf("%s (was %s)", new.AnswerFrom, old.AnswerFrom)})
	}
	return out
}

// PolicyOf is the checker's view of profile p of cfg (nil p: only the
// global settings).
func PolicyOf(cfg *config.Config, p *config.Profile) Policy {
	pol := Policy{AutoApprove: cfg.Escalation.AutoApprove}
	if p == nil {
		return pol
	}
	pol.Domains, pol.CIDRs = p.AllowDomains, p.AllowEgress
	for _, ps := range p.Secrets {
		if ps.Secret != nil {
			pol.SecretHosts = append(pol.SecretHosts, ps.Secret.Hosts...)
		}
	}
	return pol
}

func prefixes(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// entries are auto_approve rules as one line each ({args} kept).
func entries(argvs [][]string) []string {
	out := make([]string, len(argvs))
	for i, a := range argvs {
		out[i] = strings.Join(a, " ")
	}
	return out
}

// added are the members of b not in a, sorted and once each.
func added(a, b []string) []string {
	var out []string
	for _, x := range b {
		if !slices.Contains(a, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
