//go:build kube

package kube_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/engine/netdimage"
	"github.com/lazaret-dev/lazaret/internal/engine/netdpod"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// netdKube runs kubectl against the test cluster (LAZARET_KUBECONFIG;
// LAZARET_KUBECTL, default kubectl).
type netdKube struct {
	t          *testing.T
	kubeconfig string
	kubectl    string
}

func newNetdKube(t *testing.T) *netdKube {
	k := &netdKube{t: t, kubeconfig: os.Getenv("LAZARET_KUBECONFIG"), kubectl: os.Getenv("LAZARET_KUBECTL")}
	if k.kubeconfig == "" {
		t.Fatal("LAZARET_KUBECONFIG is not set: run through scripts/kube-test")
	}
	if k.kubectl == "" {
		k.kubectl = "kubectl"
	}
	return k
}

func (k *netdKube) run(ctx context.Context, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, k.kubectl, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (k *netdKube) apply(ctx context.Context, ns string, obj any) {
	k.t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		k.t.Fatal(err)
	}
	if out, err := k.run(ctx, b, "apply", "-n", ns, "-f", "-"); err != nil {
		k.t.Fatalf("%v\n%s", err, out)
	}
}

// netdImage is the netd image imported into the cluster's containerd:
// LAZARET_KUBE_NETD_IMAGE (scripts/kube-test sets it), else the only
// localhost/lazaret-netd image the node lists, read by nodeImages (the
// node's status: the kubelet lists a freshly imported image with its next
// status update, so it is waited for a while).
func netdImage(t *testing.T, nodeImages func() string) string {
	t.Helper()
	if img := os.Getenv("LAZARET_KUBE_NETD_IMAGE"); img != "" {
		return img
	}
	var found []string
	for deadline := time.Now().Add(90 * time.Second); len(found) == 0 && time.Now().Before(deadline); {
		for _, n := range strings.Fields(nodeImages()) {
			if strings.HasPrefix(n, netdimage.ImageName+":") && !slices.Contains(found, n) {
				found = append(found, n)
			}
		}
		if len(found) == 0 {
			time.Sleep(2 * time.Second)
		}
	}
	if len(found) != 1 {
		t.Fatalf("netd images on the node: %v; import one (scripts/kube-cluster import-image) or set LAZARET_KUBE_NETD_IMAGE", found)
	}
	return found[0]
}

// nodeImagesQuery lists the node's images' names (kubectl args).
var nodeImagesQuery = []string{"get", "nodes", "-o", "jsonpath={.items[*].status.images[*].names[*]}"}

// fakeUpstream is a resolver on 127.0.0.1:5353 for the pod's netd:
// private.netdpod.test answers two refused addresses and a public one,
// every other A query 192.0.3.7.
const fakeUpstream = `
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 5353))
while True:
    d, a = s.recvfrom(2048)
    i, labels = 12, []
    while d[i]:
        labels.append(d[i+1:i+1+d[i]].decode()); i += 1 + d[i]
    qtype = struct.unpack(">H", d[i+1:i+3])[0]
    name = ".".join(labels).lower()
    addrs = ["10.1.2.3", "169.254.169.254", "192.0.3.9"] if name == "private.netdpod.test" else ["192.0.3.7"]
    if qtype != 1:
        addrs = []
    ans = b"".join(b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(x) for x in addrs)
    s.sendto(d[:2] + b"\x81\x80" + struct.pack(">HHHH", 1, len(addrs), 0, 0) + d[12:i+5] + ans, a)
`

// resolveScript resolves each argument through the agent's resolv.conf
// (glibc, as any program in the agent does) and prints NAME ADDRS|NXDOMAIN.
const resolveScript = `
import socket, sys
for n in sys.argv[1:]:
    try:
        print(n, " ".join(sorted({ai[4][0] for ai in socket.getaddrinfo(n, 443, socket.AF_INET)})))
    except socket.gaierror:
        print(n, "NXDOMAIN")
`

// TestNetdPodDNSAllowlist runs a gVisor pod from netdpod.Sidecar (netd as
// its native sidecar, the agent's DNS pointed at it) and checks from the
// agent container: allowed names resolve, denied ones do not, refused
// addresses are dropped from answers, and netd's control socket is not in
// the agent's filesystem. Control: the fake upstream itself answers the
// denied name and all the refused addresses.
func TestNetdPodDNSAllowlist(t *testing.T) {
	k := newNetdKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var rnd [4]byte
	rand.Read(rnd[:])
	ns := "lzk-netd-" + hex.EncodeToString(rnd[:])
	if out, err := k.run(ctx, nil, "create", "namespace", ns); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		k.run(context.Background(), nil, "delete", "namespace", ns, "--wait=true", "--timeout=120s")
	})

	policy, err := netpolicy.FromConfig(nil, []string{"ok.netdpod.test", "private.netdpod.test"})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := netdpod.Sidecar(netdpod.Options{
		Image: netdImage(t, func() string {
			out, err := k.run(ctx, nil, nodeImagesQuery...)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}), PullPolicy: corev1.PullNever, Policy: policy,
		Upstreams: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:5353")}, Name: "lazaret-net-test",
	})
	if err != nil {
		t.Fatal(err)
	}
	k.apply(ctx, ns, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "lazaret-net-test"}, Data: spec.ConfigMapData})
	agentImage := os.Getenv("LAZARET_KUBE_AGENT_IMAGE")
	if agentImage == "" {
		agentImage = "localhost/lazaret-agent:latest"
	}
	gvisor := "gvisor"
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "netd-pod"},
		Spec: corev1.PodSpec{
			RuntimeClassName: &gvisor,
			InitContainers:   []corev1.Container{spec.Container},
			Containers: []corev1.Container{
				{Name: "agent", Image: agentImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "900"},
					VolumeMounts: spec.AgentVolumeMounts, Env: spec.AgentEnv},
				{Name: "upstream", Image: agentImage, ImagePullPolicy: corev1.PullNever, Command: []string{"python3", "-c", fakeUpstream}},
			},
			Volumes:   spec.Volumes,
			DNSPolicy: spec.DNSPolicy,
			DNSConfig: spec.DNSConfig,
		},
	}
	k.apply(ctx, ns, pod)
	if out, err := k.run(ctx, nil, "wait", "-n", ns, "--for=condition=Ready", "pod/netd-pod", "--timeout=180s"); err != nil {
		desc, _ := k.run(ctx, nil, "describe", "-n", ns, "pod/netd-pod")
		logs, _ := k.run(ctx, nil, "logs", "-n", ns, "netd-pod", "-c", netdpod.ContainerName)
		t.Fatalf("%v\n%s\n%s\nnetd: %s", err, out, desc, logs)
	}
	execIn := func(container string, args ...string) string {
		t.Helper()
		out, err := k.run(ctx, nil, append([]string{"exec", "-n", ns, "netd-pod", "-c", container, "--"}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}
	if out := execIn("agent", "dmesg"); !strings.Contains(out, "gVisor") {
		t.Errorf("the agent does not run under gVisor: dmesg says %q", out)
	}
	if out := execIn("agent", "cat", "/etc/resolv.conf"); !strings.Contains(out, "nameserver 127.0.0.1") {
		t.Errorf("agent resolv.conf: %q", out)
	}
	got := execIn("agent", "python3", "-c", resolveScript, "ok.netdpod.test", "denied.netdpod.test", "private.netdpod.test")
	for _, want := range []string{"ok.netdpod.test 192.0.3.7\n", "denied.netdpod.test NXDOMAIN\n", "private.netdpod.test 192.0.3.9\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("through netd: want %q in\n%s", want, got)
		}
	}
	direct := execIn("agent", "python3", "-c", `
import socket, struct
for n in ["denied.netdpod.test", "private.netdpod.test"]:
    q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + b"".join(bytes([len(l)]) + l.encode() for l in n.split(".")) + b"\x00\x00\x01\x00\x01"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5); s.sendto(q, ("127.0.0.1", 5353))
    d = s.recv(2048)
    print(n, struct.unpack(">H", d[6:8])[0])
`)
	if !strings.Contains(direct, "denied.netdpod.test 1") || !strings.Contains(direct, "private.netdpod.test 3") {
		t.Errorf("control: the upstream's own answers (name, count): %s", direct)
	}
	if out := execIn("agent", "sh", "-c", "ls -la /run/lazaret-netd 2>&1; test -e /run/lazaret-netd/control.sock && echo VISIBLE || echo ABSENT"); !strings.Contains(out, "ABSENT") {
		t.Errorf("the agent sees netd's run directory: %s", out)
	}
	if logs, _ := k.run(ctx, nil, "logs", "-n", ns, "netd-pod", "-c", netdpod.ContainerName); !strings.Contains(logs, "pod mode: no firewall") {
		t.Errorf("netd's log does not say it runs without a firewall:\n%s", logs)
	}
}
