//go:build kube

package kube_test

import (
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// networkPolicies is what the generated policies are checked for.
type networkPolicies struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			PodSelector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"podSelector"`
			PolicyTypes []string `json:"policyTypes"`
			Ingress     []any    `json:"ingress"`
			Egress      []struct {
				To []struct {
					IPBlock *struct {
						CIDR string `json:"cidr"`
					} `json:"ipBlock"`
				} `json:"to"`
				Ports []struct {
					Port     any    `json:"port"`
					Protocol string `json:"protocol"`
				} `json:"ports"`
			} `json:"egress"`
		} `json:"spec"`
	} `json:"items"`
}

// checkGeneratedPolicy: the NetworkPolicy agent-sandbox made from the
// template is in the namespace, selects the running sandbox's pod, admits
// no ingress, and lets the pod out only to the sidecar's upstream resolver
// on port 53 (the profile names no CIDR). The cluster stores it whether
// or not it enforces it; enforcement is the probe's business.
func checkGeneratedPolicy(t *testing.T, e *backendEnv) {
	t.Helper()
	host, _, err := net.SplitHostPort(backendUpstream(t))
	if err != nil {
		t.Fatal(err)
	}
	upstream := netip.MustParseAddr(host)
	var nps networkPolicies
	if err := json.Unmarshal([]byte(e.kube("get", "networkpolicies", "-n", e.namespace, "-o", "json")), &nps); err != nil {
		t.Fatal(err)
	}
	if len(nps.Items) == 0 {
		t.Fatal("no NetworkPolicy generated for the template")
	}
	for _, np := range nps.Items {
		sel := np.Spec.PodSelector.MatchLabels
		var parts []string
		for k, v := range sel {
			parts = append(parts, k+"="+v)
		}
		pods := strings.Fields(e.kube("get", "pods", "-n", e.namespace, "-l", strings.Join(parts, ","), "-o", "name"))
		if len(sel) == 0 || len(pods) == 0 {
			t.Errorf("policy %s selects %v: no pod of the sandbox (or every pod)", np.Metadata.Name, sel)
		}
		if len(np.Spec.Ingress) != 0 || !slices.Contains(np.Spec.PolicyTypes, "Ingress") || !slices.Contains(np.Spec.PolicyTypes, "Egress") {
			t.Errorf("policy %s: ingress %v, types %v; want no ingress, both types", np.Metadata.Name, np.Spec.Ingress, np.Spec.PolicyTypes)
		}
		found := false
		for _, r := range np.Spec.Egress {
			for _, to := range r.To {
				if to.IPBlock == nil {
					t.Errorf("policy %s: an egress peer that is not an address block: %+v", np.Metadata.Name, r.To)
					continue
				}
				p, err := netip.ParsePrefix(to.IPBlock.CIDR)
				switch {
				case err != nil || p.Bits() == 0:
					t.Errorf("policy %s: egress to %q", np.Metadata.Name, to.IPBlock.CIDR)
				case p.Contains(upstream):
					found = true
				}
			}
		}
		if !found {
			t.Errorf("policy %s: no egress to the upstream resolver %s", np.Metadata.Name, upstream)
		}
		t.Logf("policy %s: selects %v (%d pods), types %v, egress %+v", np.Metadata.Name, sel, len(pods), np.Spec.PolicyTypes, np.Spec.Egress)
	}
}
