//go:build integration

package integration

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/lazaret-dev/lazaret/internal/engine/netdimage"
	"github.com/lazaret-dev/lazaret/internal/engine/netdpod"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/engine/trust/trusttest"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// lazaret-netd in pod mode (Kubernetes' shape, as close as rootless
// podman gets): netd under runsc with only NET_BIND_SERVICE, a read-only
// root, its policy from a file (the ConfigMap) and its control socket in
// a directory only it mounts; agents under runsc joined to its network
// namespace with --network container:<netd> (host-kernel sockets in one
// namespace, so loopback is shared as in a pod's single gVisor sandbox).
// The upstream is a test resolver on the namespace's loopback.

const podHelperEnv = "LAZARET_NETDPOD_HELPER"

func init() {
	if mode := os.Getenv(podHelperEnv); mode != "" {
		os.Exit(podHelper(mode, os.Args[1:]))
	}
}

// podUpstreamAddr is the test upstream in the shared namespace.
const podUpstreamAddr = "127.0.0.1:5353"

// podTLSAddr is the secret's test host, an address on the namespace's
// loopback interface.
const podTLSAddr = "192.0.3.50"

func podHelper(mode string, args []string) int {
	switch mode {
	case "upstream":
		return podUpstream()
	case "lookup": // lookup SERVER NAME: prints the sorted addresses, or NXDOMAIN
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "udp", args[0])
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		as, err := r.LookupNetIP(ctx, "ip4", args[1])
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			fmt.Println("NXDOMAIN")
			return 0
		}
		if err != nil {
			fmt.Println("ERROR", err)
			return 1
		}
		var out []string
		for _, a := range as {
			out = append(out, a.String())
		}
		slices.Sort(out)
		fmt.Println(strings.Join(out, " "))
		return 0
	case "direct": // direct URL ADDR HEADER: GET URL connecting to ADDR whatever the name resolves to
		k, v, _ := strings.Cut(args[2], ": ")
		req, err := http.NewRequest("GET", args[0], nil)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		req.Header.Set(k, v)
		tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, args[1])
		}}
		resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		resp.Body.Close()
		fmt.Printf("status %d\n", resp.StatusCode)
		return 0
	case "control": // control PATH: connects and asks netd's status
		c, err := net.DialTimeout("unix", args[0], 5*time.Second)
		if err != nil {
			fmt.Println("UNREACHABLE", err)
			return 0
		}
		defer c.Close()
		fmt.Fprintf(c, `{"version":%d,"op":"status"}`+"\n", netdapi.Version)
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Println("REACHED", strings.TrimSpace(line))
		return 0
	}
	return 2
}

// podUpstream answers A queries: private.netdpod.test with two refused
// addresses and a public one, everything else with 192.0.3.7.
func podUpstream() int {
	pc, err := net.ListenPacket("udp", podUpstreamAddr)
	if err != nil {
		fmt.Println("listen", err)
		return 1
	}
	fmt.Println("upstream-ready")
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return 1
		}
		var m dnsmessage.Message
		if m.Unpack(buf[:n]) != nil || len(m.Questions) != 1 {
			continue
		}
		m.Header.Response = true
		q := m.Questions[0]
		addrs := []string{"192.0.3.7"}
		switch q.Name.String() {
		case "private.netdpod.test.":
			addrs = []string{"10.1.2.3", "169.254.169.254", "192.0.3.9"}
		case "api.netdpod.test.":
			addrs = []string{podTLSAddr}
		}
		if q.Type == dnsmessage.TypeA {
			for _, a := range addrs {
				m.Answers = append(m.Answers, dnsmessage.Resource{
					Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
					Body:   &dnsmessage.AResource{A: netip.MustParseAddr(a).As4()},
				})
			}
		}
		out, _ := m.Pack()
		pc.WriteTo(out, from)
	}
}

// podNetd is netd started from a netdpod.Spec: its ConfigMap and Secret
// written to the directories mounted where the pod would mount them.
type podNetd struct {
	f             *netFixture
	name          string
	cfg, sec, run string
	runsc         []string
	spec          netdpod.Spec
}

// startPodNetd writes spec's ConfigMap and Secret and starts netd with
// the spec's own arguments under runsc: only NET_BIND_SERVICE, a
// read-only root. host-uds=all lets netd create its socket in the
// bind-mounted run directory, so a positive control can mount it too.
func startPodNetd(t *testing.T, f *netFixture, o netdpod.Options) *podNetd {
	image := netdimage.ImageName + ":netdpodtest"
	if err := netdimage.BuildImage(context.Background(), f.pc, filepath.Join(binDir(t), "lazaret-netd"), image); err != nil {
		t.Fatal(err)
	}
	o.Image, o.Name = image, "lazaret-net-test"
	o.Upstreams = []netip.AddrPort{netip.MustParseAddrPort(podUpstreamAddr)}
	spec, err := netdpod.Sidecar(o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n := &podNetd{f: f, name: "lzi-netdpod-netd-" + f.suffix, spec: spec,
		cfg: filepath.Join(dir, "config"), sec: filepath.Join(dir, "secret"), run: filepath.Join(dir, "run"),
		runsc: []string{"--runtime", f.runsc, "--runtime-flag", "ignore-cgroups", "--runtime-flag", "network=host",
			"--security-opt", "no-new-privileges"}}
	for _, d := range []string{n.cfg, n.sec, n.run} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range spec.ConfigMapData {
		if err := os.WriteFile(filepath.Join(n.cfg, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range spec.SecretData {
		if err := os.WriteFile(filepath.Join(n.sec, k), v, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	args := append(slices.Clone(n.runsc), "--runtime-flag", "host-uds=all", "--network", "none",
		"--cap-drop", "ALL", "--cap-add", "NET_BIND_SERVICE", "--read-only",
		"-v", n.cfg+":"+netdapi.PodConfigDir+":ro", "-v", n.sec+":"+netdapi.PodSecretDir+":ro", "-v", n.run+":"+netdapi.PodRunDir,
		image)
	f.run(n.name, append(args, spec.Container.Args...)...)
	Eventually(t, 30*time.Second, "netd ready", func() bool { return strings.Contains(f.logs(n.name), "msg=ready") })
	// runsc with --network=host brings no interface up (runc would bring
	// up loopback); in a pod, gVisor's netstack has its own loopback.
	n.ns(t, "ip link set lo up")
	upstream := "lzi-netdpod-upstream-" + f.suffix
	f.run(upstream, append(slices.Clone(n.runsc), "--network", "container:"+n.name, "--env", podHelperEnv+"=upstream", agentImage, helperPath)...)
	Eventually(t, 20*time.Second, "upstream ready", func() bool { return strings.Contains(f.logs(upstream), "upstream-ready") })
	return n
}

// ns runs an ip command in netd's network namespace.
func (n *podNetd) ns(t *testing.T, cmd string) {
	t.Helper()
	args := append([]string{"unshare", "nsenter", "-t", n.f.pid(n.name), "-n"}, strings.Fields(cmd)...)
	if out, err := exec.Command("podman", args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
}

// agent starts an agent container in netd's namespace (as a pod's
// containers share one), with the spec's environment and args.
func (n *podNetd) agent(name string, args ...string) {
	all := append(slices.Clone(n.runsc), "--runtime-flag", "host-uds=open", "--network", "container:"+n.name, "--cap-drop", "ALL")
	for _, e := range n.spec.AgentEnv {
		all = append(all, "--env", e.Name+"="+e.Value)
	}
	n.f.run(name, append(append(all, args...), agentImage, "sleep", "900")...)
}

func podExec(t *testing.T, container string, env []string, args ...string) string {
	t.Helper()
	all := []string{"exec"}
	for _, e := range env {
		all = append(all, "--env", e)
	}
	out, err := Podman(t, append(append(all, container, helperPath), args...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}

func TestNetdPod(t *testing.T) {
	f := newNetFixture(t)
	policy, err := netpolicy.FromConfig(nil, []string{"ok.netdpod.test", "private.netdpod.test"})
	if err != nil {
		t.Fatal(err)
	}
	n := startPodNetd(t, f, netdpod.Options{Policy: policy})
	netd := n.name
	if logs := f.logs(netd); !strings.Contains(logs, "pod mode: no firewall") {
		t.Errorf("netd does not say it runs without a firewall:\n%s", logs)
	}
	run := n.run
	// The readiness probe, as the kubelet runs it in netd's container.
	probe := n.spec.Container.ReadinessProbe.Exec.Command
	if out, err := Podman(t, append([]string{"exec", netd}, probe...)...); err != nil {
		t.Errorf("readiness probe %v: %v %s", probe, err, out)
	}
	if _, err := Podman(t, append([]string{"exec", netd}, append(slices.Clone(probe), "127.0.0.1:5354")...)...); err == nil {
		t.Error("control: the probe passes against a port where nothing answers")
	}
	agent := "lzi-netdpod-agent-" + f.suffix
	n.agent(agent)
	execIn := func(container, mode string, args ...string) string {
		t.Helper()
		return podExec(t, container, []string{podHelperEnv + "=" + mode}, args...)
	}

	netdDNS := "127.0.0.1:53"
	if got := execIn(agent, "lookup", netdDNS, "ok.netdpod.test"); got != "192.0.3.7" {
		t.Errorf("allowed name through netd: %q", got)
	}
	if got := execIn(agent, "lookup", netdDNS, "denied.netdpod.test"); got != "NXDOMAIN" {
		t.Errorf("denied name through netd: %q, want NXDOMAIN", got)
	}
	if got := execIn(agent, "lookup", podUpstreamAddr, "denied.netdpod.test"); got != "192.0.3.7" {
		t.Errorf("control: the upstream itself answers the denied name with %q", got)
	}
	if got := execIn(agent, "lookup", netdDNS, "private.netdpod.test"); got != "192.0.3.9" {
		t.Errorf("answer naming private and metadata addresses through netd: %q, want only 192.0.3.9", got)
	}
	if got := execIn(agent, "lookup", podUpstreamAddr, "private.netdpod.test"); got != "10.1.2.3 169.254.169.254 192.0.3.9" {
		t.Errorf("control: the upstream's own answer is %q", got)
	}

	sock := netdapi.PodRunDir + "/" + netdapi.PodControlSocket
	if got := execIn(agent, "control", sock); !strings.HasPrefix(got, "UNREACHABLE") {
		t.Errorf("the agent reaches netd's control socket: %q", got)
	}
	// Control: the same probe from an agent that mounts netd's run
	// directory reaches the socket and gets netd's status.
	ctl := "lzi-netdpod-ctl-" + f.suffix
	n.agent(ctl, "-v", run+":"+netdapi.PodRunDir)
	got := execIn(ctl, "control", sock)
	if !strings.HasPrefix(got, "REACHED {") {
		t.Fatalf("control: an agent that mounts the run directory does not reach the socket: %q", got)
	}
	var resp netdapi.Response
	if json.Unmarshal([]byte(strings.TrimPrefix(got, "REACHED ")), &resp) == nil && resp.Status != nil {
		t.Logf("status through the control socket: applied=%v firewall=%q", resp.Status.Applied, resp.Status.Firewall)
		if resp.Status.Firewall != "" && !strings.HasPrefix(resp.Status.Firewall, "none") {
			t.Errorf("status.firewall = %q in pod mode", resp.Status.Firewall)
		}
	} else {
		t.Logf("control socket answered: %s", got)
	}
}

// TestNetdPodSecrets: netd in pod mode takes a secret's value and the CA
// key from the Secret directory (mounted into netd only) and injects the
// value into the agent's request to the secret's host, while the agent's
// environment and the ConfigMap hold only the placeholder. Control: the
// agent's own request straight to the host's address carries only the
// placeholder, so the value on the host comes from netd.
func TestNetdPodSecrets(t *testing.T) {
	f := newNetFixture(t)
	policy, err := netpolicy.FromConfig(nil, []string{"api.netdpod.test"})
	if err != nil {
		t.Fatal(err)
	}
	roots, cert, key := trusttest.ServerCert(t, "api.netdpod.test")
	ca, err := secret.NewCA([]string{"api.netdpod.test"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := ca.KeyDER()
	if err != nil {
		t.Fatal(err)
	}
	var rnd [16]byte
	rand.Read(rnd[:])
	value := "lzt-pod-value-" + hex.EncodeToString(rnd[:8])
	placeholder := "lzph-" + hex.EncodeToString(rnd[:])
	n := startPodNetd(t, f, netdpod.Options{Policy: policy,
		Secrets:   []secret.Secret{{Name: "alpha", Hosts: []string{"api.netdpod.test"}, Header: "x-api-key", Placeholder: placeholder, Value: value}},
		SecretEnv: map[string]string{"alpha": "ALPHA_KEY"}, CACert: ca.CertPEM, CAKey: caKey, Roots: roots})
	n.ns(t, "ip addr add "+podTLSAddr+"/32 dev lo")
	server := "lzi-netdpod-tls-" + f.suffix
	f.run(server, append(slices.Clone(n.runsc), "--network", "container:"+n.name, "--env", secretHelperEnv+"=tlsecho",
		"--env", "LZT_TLS_CERT="+string(cert), "--env", "LZT_TLS_KEY="+string(key), "--env", "LZT_TLS_LISTEN="+podTLSAddr+":443",
		agentImage, helperPath)...)
	Eventually(t, 20*time.Second, "tls host ready", func() bool { return strings.Contains(f.logs(server), "tls-ready") })

	// The pod's resolv.conf (dnsConfig) and CA bundle mount.
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := "lzi-netdpod-sagent-" + f.suffix
	n.agent(agent, "-v", resolv+":/etc/resolv.conf:ro",
		"-v", filepath.Join(n.cfg, netdapi.PodCABundleFile)+":"+netdpod.AgentCADir+"/"+netdapi.PodCABundleFile+":ro")
	if got := podExec(t, agent, []string{secretHelperEnv + "=get"}, "https://api.netdpod.test/"); !strings.HasPrefix(got, "status 200") {
		t.Fatalf("the agent's request through netd: %q", got)
	}
	if logs := f.logs(server); !strings.Contains(logs, "x-api-key="+value) {
		t.Errorf("the host did not get the value:\n%s", logs)
	}
	// Control: straight to the host's address, the agent has only the
	// placeholder to send.
	got := podExec(t, agent, []string{podHelperEnv + "=direct"}, "https://api.netdpod.test/", podTLSAddr+":443", "x-api-key: "+placeholder)
	if !strings.HasPrefix(got, "status 200") {
		t.Fatalf("control request: %q", got)
	}
	if logs := f.logs(server); !strings.Contains(logs, "x-api-key="+placeholder) {
		t.Errorf("control: the direct request did not arrive with the placeholder:\n%s", logs)
	}
	env, err := Podman(t, "exec", agent, "sh", "-c", "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n'")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(env, value) || !strings.Contains(env, "ALPHA_KEY="+placeholder) {
		t.Errorf("the agent's processes: value present %v, placeholder present %v", strings.Contains(env, value), strings.Contains(env, placeholder))
	}
	inspect, _ := Podman(t, "inspect", agent)
	if strings.Contains(inspect, value) {
		t.Error("podman inspect of the agent shows the value")
	}
	if strings.Contains(f.logs(n.name), value) {
		t.Error("netd's log shows the value")
	}
	for k, v := range n.spec.ConfigMapData {
		if strings.Contains(v, value) {
			t.Errorf("ConfigMap key %s holds the value", k)
		}
	}
}
