// Package policycheck is the deterministic checker of a proposed policy
// change (issue #36): given the policy as sets (allowed names and
// networks, the secrets' hosts, the auto_approve rules) and one
// candidate rule, it returns findings in a fixed order. No solver, no
// network, no clock: the same input gives the same findings on every
// host, so a decision can be bound to them and `auto` can approve only a
// candidate with none. Version says which rules produced a result.
package policycheck

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// Version is the checker's rule set; a finding added or changed bumps it,
// and every audited result carries it.
const Version = 1

// Severity orders findings.
type Severity int

const (
	// Info is said but does not stop `proposals = "auto"`.
	Info Severity = iota
	// Review needs a human: `auto` leaves the proposal to them.
	Review
	// Refuse is never applied, whoever answers.
	Refuse
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Review:
		return "review"
	}
	return "refuse"
}

// MarshalText writes the severity's name (JSON and the audit trail).
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Finding codes.
const (
	CodeSpecialRange = "special-range"
	CodeTooBroad     = "too-broad"
	CodeWildcard     = "wildcard"
	CodeSecretHost   = "secret-host"
	CodeUserContent  = "user-content"
	CodeLookAlike    = "look-alike"
	CodeMixedScripts = "mixed-scripts"
	CodeIPLiteral    = "ip-literal"
	CodePorts        = "ports"
	CodeAlready      = "already-allowed"
	CodeExecRefused  = "exec-refused"
	CodeAgentFiles   = "reads-agent-files"
)

// Finding is one thing the human should know about a candidate.
type Finding struct {
	Code     string   `json:"code"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
}

// Policy is the policy a candidate is checked against, as sets.
type Policy struct {
	// Domains are allow_domains patterns (exact names or "*." suffixes).
	Domains []string
	// CIDRs are allow_egress networks.
	CIDRs []netip.Prefix
	// SecretHosts are the hosts (patterns) the profile's secrets are
	// injected into.
	SecretHosts []string
	// AutoApprove are the auto_approve rules, each its argv.
	AutoApprove [][]string
}

// Result is a checked candidate: its normal form and what was found.
type Result struct {
	Version int `json:"checker_version"`
	// Kind is "net" or "exec".
	Kind string `json:"kind"`
	// Rule is the candidate in normal form: the allow_domains pattern or
	// allow_egress CIDR for net, the auto_approve entry for exec.
	Rule     string    `json:"rule"`
	Port     int       `json:"port,omitempty"`
	Findings []Finding `json:"findings"`
}

// Worst is the highest severity found; -1 with no findings.
func (r Result) Worst() Severity {
	w := Severity(-1)
	for _, f := range r.Findings {
		w = max(w, f.Severity)
	}
	return w
}

// Clean reports whether `proposals = "auto"` may apply r: nothing above Info.
func (r Result) Clean() bool { return r.Worst() < Review }

// Refused reports whether r may never be applied.
func (r Result) Refused() bool { return r.Worst() == Refuse }

// MaxCandidate bounds a candidate's text: a name is at most 253 bytes, a
// command line longer than this is no rule a human can review.
const MaxCandidate = 4096

// SplitHostPort reads HOST[:PORT] (an IPv6 address with a port in
// brackets); port 0 means none given.
func SplitHostPort(s string) (host string, port int, err error) {
	if len(s) > MaxCandidate {
		return "", 0, fmt.Errorf("%d bytes: longer than any host name", len(s))
	}
	host = s
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", 0, fmt.Errorf("%q: unclosed [", s)
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		p, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return "", 0, fmt.Errorf("%q: expected :PORT after ]", s)
		}
		port, err := parsePort(p)
		return host, port, err
	}
	if strings.Count(s, ":") == 1 {
		h, p, _ := strings.Cut(s, ":")
		port, err := parsePort(p)
		return h, port, err
	}
	return host, 0, nil
}

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strings.HasPrefix(p, "+") || strings.HasPrefix(p, "0") {
		return 0, fmt.Errorf("invalid port %q: want 1 to 65535", p)
	}
	return n, nil
}

// CheckNet checks a proposed allow rule: a domain pattern, an address or
// a CIDR, with an optional port.
func CheckNet(p Policy, hostPort string) (Result, error) {
	host, port, err := SplitHostPort(hostPort)
	if err != nil {
		return Result{}, err
	}
	r := Result{Version: Version, Kind: "net", Port: port}
	host = strings.TrimSpace(host)
	if host == "*" {
		r.Rule = "*"
		r.Findings = append(r.Findings, Finding{CodeTooBroad, Refuse, "\"*\" opens every name on the Internet"})
		return r, nil
	}
	ascii, lookErr := toASCII(host)
	cidr, name, err := netpolicy.ParseTarget(ascii)
	if strings.HasPrefix(ascii, "*.") && lookErr == nil && wildcardOverSuffix(ascii) {
		r.Rule = ascii
		r.Findings = append(r.Findings, Finding{CodeTooBroad, Refuse,
			fmt.Sprintf("%s covers every name under a public suffix: each one has another owner", quote(ascii))})
		return r, nil
	}
	if lookErr != nil || err != nil {
		return Result{}, fmt.Errorf("%s is neither a host name, an address nor a CIDR", quote(host))
	}
	if name == "" {
		r.Rule = cidr.String()
		r.Findings = checkCIDR(p, cidr)
	} else {
		r.Rule = name
		r.Findings = checkName(p, host, name)
	}
	if port != 0 {
		r.Findings = append(r.Findings, Finding{CodePorts, Info,
			fmt.Sprintf("the egress policy has no ports: allowing %s opens every port of it, not only %d", r.Rule, port)})
	}
	return r, nil
}

// checkCIDR: special ranges are refused outright (a proposal comes from
// the agent; the user can still write allow_egress by hand), broad
// networks too, and any public address is an IP literal a name's owner
// does not vouch for.
func checkCIDR(p Policy, c netip.Prefix) []Finding {
	var out []Finding
	if why := specialOverlap(c); why != "" {
		out = append(out, Finding{CodeSpecialRange, Refuse, fmt.Sprintf("%s reaches %s", c, why)})
	}
	if broad(c) {
		out = append(out, Finding{CodeTooBroad, Refuse, fmt.Sprintf("%s is broader than /%d", c, broadBits(c))})
	}
	if len(out) == 0 {
		out = append(out, Finding{CodeIPLiteral, Review, fmt.Sprintf("%s is an address, not a name: whatever answers there is reached", c)})
	}
	for _, have := range p.CIDRs {
		if have.Overlaps(c) && have.Bits() <= c.Bits() {
			out = append(out, Finding{CodeAlready, Info, fmt.Sprintf("already allowed by %s", have)})
			break
		}
	}
	return out
}

// specialOverlap names the first special-purpose range, always-denied
// network or slirp4netns address c reaches.
func specialOverlap(c netip.Prefix) string {
	ranges := netpolicy.Special4
	if c.Addr().Is6() {
		ranges = netpolicy.Special6
	}
	for _, s := range ranges {
		if s.Prefix.Overlaps(c) {
			return s.Name + " (" + s.Prefix.String() + ")"
		}
	}
	for _, d := range netpolicy.AlwaysDeny {
		if d.Overlaps(c) {
			return "cloud metadata (" + d.String() + ")"
		}
	}
	for _, a := range netpolicy.SlirpAddrs {
		if c.Contains(a) {
			return "the host through slirp4netns (" + a.String() + ")"
		}
	}
	return ""
}

// Breadth bounds of a proposed CIDR: narrower than config's warning
// bounds, since the agent, not the user, wrote it.
const (
	MaxBits4 = 16
	MaxBits6 = 32
)

func broadBits(c netip.Prefix) int {
	if c.Addr().Is4() {
		return MaxBits4
	}
	return MaxBits6
}

func broad(c netip.Prefix) bool { return c.Bits() < broadBits(c) }

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strconv.QuoteToASCII(s)
}
