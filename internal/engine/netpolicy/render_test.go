package netpolicy

import (
	"fmt"
	"strings"
)

func (f Family) String() string {
	switch f {
	case IPv4:
		return "ipv4"
	case IPv6:
		return "ipv6"
	}
	return "any"
}

// Render prints rs in nft's syntax. It is the golden form of the model in
// tests; it is not fed to nft.
func (rs Ruleset) Render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", rs.Table)
	for _, s := range rs.Sets {
		typ := "ipv4_addr"
		if s.Family == IPv6 {
			typ = "ipv6_addr"
		}
		fmt.Fprintf(&b, "\tset %s {\n\t\ttype %s\n", s.Name, typ)
		var flags []string
		if s.Interval {
			flags = append(flags, "interval")
		}
		if s.Timeout {
			flags = append(flags, "timeout")
		}
		if len(flags) > 0 {
			fmt.Fprintf(&b, "\t\tflags %s\n", strings.Join(flags, ","))
		}
		if s.Timeout {
			fmt.Fprintf(&b, "\t\tsize %d\n", MaxResolved)
		}
		if len(s.Elements) > 0 {
			el := make([]string, len(s.Elements))
			for i, e := range s.Elements {
				el[i] = e.String()
			}
			fmt.Fprintf(&b, "\t\telements = { %s }\n", strings.Join(el, ", "))
		}
		b.WriteString("\t}\n")
	}
	fmt.Fprintf(&b, "\tchain %s {\n\t\ttype filter hook output priority %d; policy %s;\n", rs.Chain, rs.Priority, rs.Policy)
	for _, r := range rs.Rules {
		fmt.Fprintf(&b, "\t\t%s\n", r.Render())
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// Render prints one rule in nft's syntax.
func (r Rule) Render() string {
	var parts []string
	if r.Family != AnyFamily && r.DaddrSet == "" && !r.ICMPv6ND {
		parts = append(parts, "meta nfproto "+r.Family.String())
	}
	if r.OifLo {
		parts = append(parts, `oifname "lo"`)
	}
	if len(r.CtState) > 0 {
		parts = append(parts, "ct state "+strings.Join(r.CtState, ","))
	}
	if r.Mark != 0 {
		parts = append(parts, fmt.Sprintf("meta mark 0x%08x", r.Mark))
	}
	if r.ICMPv6ND {
		parts = append(parts, "icmpv6 type 133-136 ip6 hoplimit 255")
	} else if r.L4 != 0 {
		name := map[uint8]string{ProtoTCP: "tcp", ProtoUDP: "udp", ProtoICMPv6: "icmpv6"}[r.L4]
		if r.Dport != 0 {
			parts = append(parts, fmt.Sprintf("%s dport %d", name, r.Dport))
		} else {
			parts = append(parts, "meta l4proto "+name)
		}
	}
	if r.DaddrSet != "" {
		ip := "ip"
		if r.Family == IPv6 {
			ip = "ip6"
		}
		parts = append(parts, fmt.Sprintf("%s daddr @%s", ip, r.DaddrSet))
	}
	if r.Counter {
		parts = append(parts, "counter")
	}
	if r.LogGroup != 0 {
		parts = append(parts, fmt.Sprintf("log group %d snaplen %d", r.LogGroup, DenyLogSnaplen))
	}
	v := string(r.Verdict)
	if r.Verdict == Reject {
		v = "reject with icmpx admin-prohibited"
	}
	parts = append(parts, v)
	return strings.Join(parts, " ") + fmt.Sprintf(" comment %q", r.Comment)
}
