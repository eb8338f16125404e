package netdpod

import (
	"errors"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// publicInternet are the ranges a profile with allow_domains may reach at
// the IP level, each with the special-purpose blocks inside it excepted:
// private networks (the pod and service networks among them), loopback,
// link-local and metadata, documentation and reserved ranges.
var publicInternet = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("2000::/3")}

// NetworkPolicyEgress is the egress of a sandbox's NetworkPolicy (with
// policyTypes [Egress], everything not listed is denied):
//
//   - each permanent allow_egress CIDR, with the always-denied metadata
//     and link-local blocks inside it excepted (a CIDR wholly inside one
//     is dropped, as locally the deny set wins); entries with an expiry
//     (`lazaret net allow --for`) are not put into an object that would
//     outlive them;
//   - the upstream resolvers on their port, UDP and TCP, both as address
//     blocks and as the cluster DNS pods (k8s-app=kube-dns in
//     kube-system), since many network plugins apply policy after the
//     Service address was translated to a pod's;
//   - when the policy allows any domain: the public internet (0.0.0.0/0
//     and 2000::/3 without every special-purpose block), on every port.
//
// Domain rules are not expressible in a NetworkPolicy: it matches
// addresses, and the addresses of an allowed name are known only to the
// resolver that answered. On Kubernetes a domain allowlist is therefore
// enforced by DNS only (netd's resolver answers allowed names and refuses
// the rest), and an agent that dials an address literal is limited by
// this policy alone: with allow_domains, any public address. The cluster
// DNS is reachable by the agent too (a NetworkPolicy cannot tell the
// pod's containers apart), so a name can also be resolved, and data
// tunnelled in names, through it directly.
func NetworkPolicyEgress(p netpolicy.Policy, upstreams []netip.AddrPort) ([]networkingv1.NetworkPolicyEgressRule, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if len(upstreams) == 0 {
		return nil, errors.New("netdpod: no upstream resolver")
	}
	var rules []networkingv1.NetworkPolicyEgressRule
	var peers []networkingv1.NetworkPolicyPeer
	for _, c := range p.Active(time.Now()).AllowEgress {
		if !c.Expires.IsZero() {
			continue
		}
		if peer, ok := blockPeer(c.Prefix, netpolicy.AlwaysDeny); ok {
			peers = append(peers, peer)
		}
	}
	if len(peers) > 0 {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{To: peers})
	}
	rules = append(rules, dnsRule(upstreams))
	if len(p.AllowDomains) > 0 {
		var special []netip.Prefix
		for _, r := range append(append([]netpolicy.SpecialRange{}, netpolicy.Special4...), netpolicy.Special6...) {
			special = append(special, r.Prefix)
		}
		special = append(special, netpolicy.AlwaysDeny...)
		var pub []networkingv1.NetworkPolicyPeer
		for _, c := range publicInternet {
			peer, _ := blockPeer(c, special)
			pub = append(pub, peer)
		}
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{To: pub})
	}
	return rules, nil
}

// blockPeer is an ipBlock for c without the prefixes of deny inside it;
// ok is false when c lies wholly inside one of them.
func blockPeer(c netip.Prefix, deny []netip.Prefix) (networkingv1.NetworkPolicyPeer, bool) {
	c = c.Masked()
	var except []string
	for _, d := range netpolicy.MergePrefixes(deny) {
		if d.Addr().Is4() != c.Addr().Is4() {
			continue
		}
		switch {
		case d.Bits() <= c.Bits() && d.Contains(c.Addr()):
			return networkingv1.NetworkPolicyPeer{}, false
		case d.Bits() > c.Bits() && c.Contains(d.Addr()):
			except = append(except, d.String())
		}
	}
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c.String(), Except: except}}, true
}

// dnsRule lets netd reach the upstream resolvers.
func dnsRule(upstreams []netip.AddrPort) networkingv1.NetworkPolicyEgressRule {
	var r networkingv1.NetworkPolicyEgressRule
	seenPort := map[uint16]bool{}
	for _, u := range upstreams {
		a := u.Addr().Unmap()
		r.To = append(r.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(a, a.BitLen()).String()}})
		if !seenPort[u.Port()] {
			seenPort[u.Port()] = true
			for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
				r.Ports = append(r.Ports, networkingv1.NetworkPolicyPort{Protocol: ptr(proto), Port: ptr(intstr.FromInt32(int32(u.Port())))})
			}
		}
	}
	r.To = append(r.To, networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
	})
	return r
}
