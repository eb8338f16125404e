// Package netpolicy is the egress policy of a sandbox's network namespace:
// the policy model (allowed CIDRs and domains, always-denied addresses) and
// its translation into the rules of one nftables inet table, as plain data;
// internal/sidecar/firewall installs them (only the sidecar links nftables).
package netpolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Policy is what a sandbox may reach. The zero value allows nothing but
// loopback.
type Policy struct {
	// AllowEgress are the merged CIDRs (global [network].allow_egress and
	// the profile's allow_egress).
	AllowEgress []CIDR `json:"allow_egress"`
	// AllowDomains are exact names ("registry.npmjs.org") or suffix
	// patterns ("*.example.com", which does not match example.com itself).
	AllowDomains []Domain `json:"allow_domains"`
}

// CIDR is one allowed prefix, permanent when Expires is zero.
type CIDR struct {
	Prefix  netip.Prefix `json:"prefix"`
	Expires time.Time    `json:"expires,omitzero"`
}

// Domain is one allowed name pattern, permanent when Expires is zero.
type Domain struct {
	Pattern string    `json:"pattern"`
	Expires time.Time `json:"expires,omitzero"`
}

// FromConfig builds a permanent policy from configuration values.
func FromConfig(egress []netip.Prefix, domains []string) (Policy, error) {
	var p Policy
	for _, e := range egress {
		p.AllowEgress = append(p.AllowEgress, CIDR{Prefix: e})
	}
	for _, d := range domains {
		p.AllowDomains = append(p.AllowDomains, Domain{Pattern: d})
	}
	return p, p.Validate()
}

// Validate checks every entry; it names the first bad one.
func (p Policy) Validate() error {
	for _, c := range p.AllowEgress {
		if !c.Prefix.IsValid() {
			return fmt.Errorf("allow_egress: invalid prefix %q", c.Prefix)
		}
	}
	for _, d := range p.AllowDomains {
		if _, err := NormalizePattern(d.Pattern); err != nil {
			return fmt.Errorf("allow_domains: %w", err)
		}
	}
	return nil
}

// Active returns the policy without the entries expired at now, with CIDRs
// masked and de-duplicated and domain patterns normalized.
func (p Policy) Active(now time.Time) Policy {
	var out Policy
	seenC := map[netip.Prefix]int{}
	for _, c := range p.AllowEgress {
		if expired(c.Expires, now) || !c.Prefix.IsValid() {
			continue
		}
		c.Prefix = c.Prefix.Masked()
		if i, ok := seenC[c.Prefix]; ok {
			out.AllowEgress[i].Expires = later(out.AllowEgress[i].Expires, c.Expires)
			continue
		}
		seenC[c.Prefix] = len(out.AllowEgress)
		out.AllowEgress = append(out.AllowEgress, c)
	}
	seenD := map[string]int{}
	for _, d := range p.AllowDomains {
		n, err := NormalizePattern(d.Pattern)
		if err != nil || expired(d.Expires, now) {
			continue
		}
		d.Pattern = n
		if i, ok := seenD[n]; ok {
			out.AllowDomains[i].Expires = later(out.AllowDomains[i].Expires, d.Expires)
			continue
		}
		seenD[n] = len(out.AllowDomains)
		out.AllowDomains = append(out.AllowDomains, d)
	}
	return out
}

// NextExpiry is the earliest future expiry of any entry, zero if none.
func (p Policy) NextExpiry() time.Time {
	var next time.Time
	upd := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, c := range p.AllowEgress {
		upd(c.Expires)
	}
	for _, d := range p.AllowDomains {
		upd(d.Expires)
	}
	return next
}

// AllowsName reports whether name (a query name, with or without the
// trailing dot) matches one of the active domain patterns.
func (p Policy) AllowsName(name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	for _, d := range p.AllowDomains {
		if suffix, ok := strings.CutPrefix(d.Pattern, "*."); ok {
			if strings.HasSuffix(name, "."+suffix) {
				return true
			}
		} else if name == d.Pattern {
			return true
		}
	}
	return false
}

// ErrBadPattern is returned for a domain pattern that is not a host name or
// a "*." suffix pattern.
var ErrBadPattern = errors.New("invalid domain pattern")

// NormalizePattern lower-cases pattern, drops a trailing dot and checks it:
// labels of letters, digits, '-' and '_' (1–63 bytes), at most 253 bytes,
// and '*' only as the whole first label.
func NormalizePattern(pattern string) (string, error) {
	p := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(pattern), "."))
	name := strings.TrimPrefix(p, "*.")
	if name == "" || len(name) > 253 {
		return "", fmt.Errorf("%w %q", ErrBadPattern, pattern)
	}
	labels := strings.Split(name, ".")
	if strings.HasPrefix(p, "*.") && len(labels) < 2 {
		// "*.com" would open a whole top-level domain.
		return "", fmt.Errorf("%w %q: a wildcard needs at least two labels after it", ErrBadPattern, pattern)
	}
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 {
			return "", fmt.Errorf("%w %q", ErrBadPattern, pattern)
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return "", fmt.Errorf("%w %q", ErrBadPattern, pattern)
			}
		}
	}
	return p, nil
}

// ParseTarget parses the argument of `lazaret net allow`: a CIDR, a bare
// address (as a /32 or /128), or a domain pattern.
func ParseTarget(s string) (cidr netip.Prefix, domain string, err error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), "", nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), "", nil
	}
	d, err := NormalizePattern(s)
	if err != nil {
		return netip.Prefix{}, "", fmt.Errorf("%q is neither a CIDR, an address nor a domain name", s)
	}
	return netip.Prefix{}, d, nil
}

// Equal reports whether two policies hold the same entries in order.
func (p Policy) Equal(q Policy) bool {
	a, _ := json.Marshal(p)
	b, _ := json.Marshal(q)
	return slices.Equal(a, b)
}

func expired(t, now time.Time) bool { return !t.IsZero() && !t.After(now) }

// later returns the later expiry, where zero (permanent) wins.
func later(a, b time.Time) time.Time {
	if a.IsZero() || b.IsZero() {
		return time.Time{}
	}
	if a.After(b) {
		return a
	}
	return b
}
