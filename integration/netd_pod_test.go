//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/lazaret-dev/lazaret/internal/netdapi"
	"github.com/lazaret-dev/lazaret/internal/netdimage"
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
		if q.Name.String() == "private.netdpod.test." {
			addrs = []string{"10.1.2.3", "169.254.169.254", "192.0.3.9"}
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

func TestNetdPod(t *testing.T) {
	f := newNetFixture(t)
	image := netdimage.ImageName + ":netdpodtest"
	if err := netdimage.BuildImage(context.Background(), f.pc, filepath.Join(binDir(t), "lazaret-netd"), image); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg, run := filepath.Join(dir, "config"), filepath.Join(dir, "run")
	for _, d := range []string{cfg, run} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	policy := `{"allow_domains":[{"pattern":"ok.netdpod.test"},{"pattern":"private.netdpod.test"}]}`
	if err := os.WriteFile(filepath.Join(cfg, netdapi.PodPolicyFile), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	runsc := []string{"--runtime", f.runsc, "--runtime-flag", "ignore-cgroups", "--runtime-flag", "network=host",
		"--security-opt", "no-new-privileges"}
	netd := "lzi-netdpod-netd-" + f.suffix
	// host-uds=all lets netd create its socket in the bind-mounted run
	// directory, so the positive control below can mount it too.
	f.run(netd, append(slices.Clone(runsc), "--runtime-flag", "host-uds=all", "--network", "none",
		"--cap-drop", "ALL", "--cap-add", "NET_BIND_SERVICE", "--read-only",
		"-v", cfg+":"+netdapi.PodConfigDir+":ro", "-v", run+":"+netdapi.PodRunDir,
		image, "--pod", "--policy-file", netdapi.PodConfigDir+"/"+netdapi.PodPolicyFile,
		"--upstream", podUpstreamAddr, "--control", netdapi.PodRunDir+"/"+netdapi.PodControlSocket)...)
	Eventually(t, 30*time.Second, "netd ready", func() bool { return strings.Contains(f.logs(netd), "msg=ready") })
	// runsc with --network=host brings no interface up (runc would bring
	// up loopback); in a pod, gVisor's netstack has its own loopback.
	if out, err := exec.Command("podman", "unshare", "nsenter", "-t", f.pid(netd), "-n", "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("loopback up: %v\n%s", err, out)
	}
	logs := f.logs(netd)
	if !strings.Contains(logs, "pod mode: no firewall") {
		t.Errorf("netd does not say it runs without a firewall:\n%s", logs)
	}

	agent := "lzi-netdpod-agent-" + f.suffix
	f.run(agent, append(slices.Clone(runsc), "--runtime-flag", "host-uds=open", "--network", "container:"+netd,
		"--cap-drop", "ALL", agentImage, "sleep", "900")...)
	execIn := func(container string, env string, args ...string) string {
		t.Helper()
		all := append([]string{"exec", "--env", podHelperEnv + "=" + env, container, helperPath}, args...)
		out, err := Podman(t, all...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return strings.TrimSpace(out)
	}
	upstream := "lzi-netdpod-upstream-" + f.suffix
	f.run(upstream, append(slices.Clone(runsc), "--network", "container:"+netd, "--env", podHelperEnv+"=upstream", agentImage, helperPath)...)
	Eventually(t, 20*time.Second, "upstream ready", func() bool { return strings.Contains(f.logs(upstream), "upstream-ready") })

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
	f.run(ctl, append(slices.Clone(runsc), "--runtime-flag", "host-uds=open", "--network", "container:"+netd,
		"-v", run+":"+netdapi.PodRunDir, agentImage, "sleep", "900")...)
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
