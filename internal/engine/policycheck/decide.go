package policycheck

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// Decision is what a policy does with one destination (`lazaret net
// check`): it never resolves a name, asks or holds anything.
type Decision struct {
	Allowed bool   `json:"allowed"`
	Target  string `json:"target"`
	// Rule is the entry that allows it; Why says why not, or what still
	// applies to an allowed name.
	Rule string `json:"rule,omitempty"`
	Why  string `json:"why"`
}

// Decide says whether pol (its entries active at now) lets the sandbox
// reach hostPort, as netd and the firewall would: a name by its
// allow_domains patterns (and then only at the public addresses its DNS
// answers give), an address by allow_egress, never an always-denied one.
func Decide(pol netpolicy.Policy, hostPort string, now time.Time) (Decision, error) {
	host, _, err := SplitHostPort(hostPort)
	if err != nil {
		return Decision{}, err
	}
	ascii, err := toASCII(strings.TrimSpace(host))
	if err != nil || strings.HasPrefix(ascii, "*.") {
		return Decision{}, fmt.Errorf("%s is not a host name or an address", quote(host))
	}
	cidr, name, err := netpolicy.ParseTarget(ascii)
	if err != nil || (name == "" && !cidr.IsSingleIP()) {
		return Decision{}, fmt.Errorf("%s is not a host name or an address", quote(host))
	}
	pol = pol.Active(now)
	if name != "" {
		return decideName(pol, name), nil
	}
	return decideAddr(pol, cidr.Addr()), nil
}

func decideName(pol netpolicy.Policy, name string) Decision {
	d := Decision{Target: name}
	for _, p := range pol.AllowDomains {
		if (netpolicy.Policy{AllowDomains: []netpolicy.Domain{p}}).AllowsName(name) {
			d.Allowed, d.Rule = true, p.Pattern
			d.Why = "its DNS answers are opened, except addresses of the host, private and other special ranges"
			return d
		}
	}
	d.Why = "no allow_domains entry matches it: its lookup is refused"
	return d
}

func decideAddr(pol netpolicy.Policy, a netip.Addr) Decision {
	d := Decision{Target: a.String()}
	for _, p := range netpolicy.AlwaysDeny {
		if p.Contains(a) {
			d.Why = "cloud metadata (" + p.String() + ") is always denied"
			return d
		}
	}
	for _, c := range pol.AllowEgress {
		if c.Prefix.Contains(a) {
			d.Allowed, d.Rule, d.Why = true, c.Prefix.String(), "allowed by allow_egress"
			return d
		}
	}
	d.Why = "no allow_egress network contains it (an address opened by a name's DNS answer is opened only for that while)"
	return d
}
