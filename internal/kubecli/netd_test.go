package kubecli

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube/kubetest"
	"github.com/lazaret-dev/lazaret/internal/engine/netdimage"
	"github.com/lazaret-dev/lazaret/internal/engine/netdpod"
)

// TestTemplateHasNetworkSidecar: a started profile's template carries
// lazaret-netd as a native sidecar answering the pod's DNS, forwarding to
// the cluster's kube-dns (or [cluster].dns), with port 53 to it the only
// egress the NetworkPolicy adds; the ConfigMap holds the domain policy.
func TestTemplateHasNetworkSidecar(t *testing.T) {
	for _, c := range []struct{ cfg, image, upstream string }{
		{plainCfg, netdimage.ImageRef(), kubetest.ClusterDNS + ":53"},
		{plainCfg + "netd_image = \"reg.example/netd:2\"\ndns = [\"192.0.2.53:5353\"]\n", "reg.example/netd:2", "192.0.2.53:5353"},
	} {
		e := newEnv(t, c.cfg+"[profiles.dev]\nimage = \"agent:1\"\nallow_domains = [\"example.org\"]\npersistent_dirs = []\n")
		e.record(enforced)
		e.readyAfter(1, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse})
		if code := e.run("exec", "dev", "--", "true"); code != 0 {
			t.Fatalf("exit %d: %s", code, e.errOut.String())
		}
		ts, err := e.cluster.Client.Templates(context.Background(), "")
		if err != nil || len(ts) != 1 {
			t.Fatalf("templates %d, %v", len(ts), err)
		}
		pod := ts[0].Spec.PodTemplate.Spec
		// The in-pod client's installer first (always: kept sessions need
		// its terminal keeper with escalation off too), then netd.
		if len(pod.InitContainers) != 2 || pod.InitContainers[0].Name != netdpod.InstallerName {
			t.Fatalf("init containers %+v", pod.InitContainers)
		}
		sc := pod.InitContainers[1]
		if sc.Image != c.image || sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Fatalf("sidecar %+v", sc)
		}
		if !slices.Contains(sc.Args, c.upstream) {
			t.Errorf("sidecar args %q, want upstream %s", sc.Args, c.upstream)
		}
		if pod.DNSPolicy != corev1.DNSNone || pod.DNSConfig == nil || !slices.Equal(pod.DNSConfig.Nameservers, []string{"127.0.0.1"}) {
			t.Errorf("pod DNS %s %+v", pod.DNSPolicy, pod.DNSConfig)
		}
		np := ts[0].Spec.NetworkPolicy
		if np == nil || len(np.Egress) != 1 || len(np.Egress[0].To) != 1 || !strings.HasPrefix(np.Egress[0].To[0].IPBlock.CIDR, strings.Split(c.upstream, ":")[0]+"/") {
			t.Errorf("network policy %+v", np)
		}
		var cmName string
		for _, v := range pod.Volumes {
			if v.ConfigMap != nil {
				cmName = v.ConfigMap.Name
			}
		}
		cm, err := e.cluster.Client.ConfigMap(context.Background(), cmName)
		if err != nil || !strings.Contains(strings.Join(mapValues(cm), ""), "example.org") {
			t.Errorf("sidecar ConfigMap %v, %v", cm, err)
		}
	}
}

// TestNoResolverForTheSidecar: without [cluster].dns and without kube-dns
// nothing starts, and the error says which key to set.
func TestNoResolverForTheSidecar(t *testing.T) {
	e := newEnv(t, plainCfg+"[profiles.dev]\nimage = \"agent:1\"\n")
	e.record(enforced)
	if err := e.cluster.Core.CoreV1().Services("kube-system").Delete(context.Background(), "kube-dns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := e.run("exec", "dev", "--", "true"); code == 0 || !strings.Contains(e.errOut.String(), "[cluster] dns") {
		t.Fatalf("exit %d: %s", code, e.errOut.String())
	}
	if len(e.claims()) != 0 {
		t.Fatalf("a claim was made: %+v", e.claims())
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
