//go:build integration

package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/netdimage"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/locate"
)

// Network tests: a real lazaret-netd sidecar (runc, rootless podman,
// slirp4netns uplink) and a runsc agent in its namespace, against test
// hosts in a network namespace the test makes: a runc container with
// --network none whose namespace is joined to the sidecar's by a veth pair
// created from `podman unshare` (the rootless user namespace owns both
// namespaces; a root-made `ip netns` would not be reachable from it).
// Every denial has a positive control: the same probe from a runsc agent in
// a namespace wired identically but without netd succeeds.

const (
	netTestImage  = "localhost/lazaret-netd:nettest"
	agentImage    = "localhost/lazaret-default:latest"
	helperPath    = "/run/nethelper"
	netTestConfig = `[network]
allow_egress = ["192.0.2.0/28", "2001:db8::/124", "169.254.0.0/16"]
allow_domains = ["allowed.test", "v6.allowed.test", "*.wild.test"]
`
)

// Addresses of the test hosts (all on the server side of the veth). The
// 192.0.3.0/24 and 3ffe:20::/64 hosts stand for public servers (DNS
// answers may open only such addresses); the veth's connected routes keep
// every packet to them inside the test's namespaces.
var serverAddrs = []string{"192.0.2.10/24", "192.0.2.20/24", "192.0.2.30/24", "192.0.2.53/24", "169.254.169.254/32",
	"192.0.3.20/24", "192.0.3.21/24", "192.0.3.30/24", "192.0.3.31/24"}
var serverAddrs6 = []string{"2001:db8::a/64", "2001:db8::20/64", "2001:db8::30/64", "3ffe:20::20/64"}

type netFixture struct {
	t      *testing.T
	pc     *podman.Client
	helper string // this test binary, mounted into every container
	runsc  string
	suffix string
}

func newNetFixture(t *testing.T) *netFixture {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	runsc, err := locate.Find(locate.Runsc)
	if err != nil {
		t.Fatal(err)
	}
	return &netFixture{t: t, pc: &podman.Client{}, helper: exe, runsc: runsc, suffix: strconv.Itoa(os.Getpid())}
}

func (f *netFixture) helperMount() string {
	return "type=bind,source=" + f.helper + ",destination=" + helperPath + ",readonly=true"
}

// run starts a detached container and removes it at cleanup.
func (f *netFixture) run(name string, args ...string) {
	f.t.Helper()
	all := append([]string{"run", "-d", "--replace", "--name", name, "--mount", f.helperMount()}, args...)
	if out, err := Podman(f.t, all...); err != nil {
		f.t.Fatalf("%v\n%s", err, out)
	}
	f.t.Cleanup(func() { Podman(f.t, "rm", "-f", "-t", "0", name) })
}

func (f *netFixture) pid(name string) string {
	f.t.Helper()
	out, err := Podman(f.t, "inspect", "--format", "{{.State.Pid}}", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// startServer starts a test host with no network; wire gives it one.
func (f *netFixture) startServer(name string) {
	f.run(name, "--runtime", "runc", "--network", "none", "--env", netHelperEnv+"=serve", agentImage, helperPath)
	Eventually(f.t, 20*time.Second, name+" ready", func() bool {
		return strings.Contains(f.logs(name), "ready")
	})
}

// logs is the container's stdout and stderr (netd logs on stderr).
func (f *netFixture) logs(name string) string {
	out, _ := exec.Command("podman", "logs", name).CombinedOutput()
	return string(out)
}

// wire joins the client namespace (of container client) to the server's
// with a veth pair, from inside the rootless user namespace.
func (f *netFixture) wire(client, server string) {
	f.t.Helper()
	cp, sp := f.pid(client), f.pid(server)
	c := "nsenter -t " + cp + " -n "
	s := "nsenter -t " + sp + " -n "
	script := []string{
		c + "ip link add lzv0 type veth peer name lzv1 netns " + sp,
		c + "ip addr add 192.0.2.1/24 dev lzv0",
		c + "ip -6 addr add 2001:db8::1/64 dev lzv0 nodad",
		c + "ip addr add 192.0.3.1/24 dev lzv0",
		c + "ip -6 addr add 3ffe:20::1/64 dev lzv0 nodad",
		c + "ip link set lzv0 up",
		c + "ip route add 169.254.169.254/32 dev lzv0",
		s + "ip link set lzv1 up",
	}
	for _, a := range serverAddrs {
		script = append(script, s+"ip addr add "+a+" dev lzv1")
	}
	for _, a := range serverAddrs6 {
		script = append(script, s+"ip -6 addr add "+a+" dev lzv1 nodad")
	}
	out, err := exec.Command("podman", "unshare", "sh", "-ec", strings.Join(script, "\n")).CombinedOutput()
	if err != nil {
		f.t.Fatalf("wiring %s to %s: %v\n%s", client, server, err, out)
	}
	// The DNS server binds its own address, which exists only now (a
	// wildcard socket would answer from another source address).
	Eventually(f.t, 20*time.Second, server+" dns ready", func() bool {
		return strings.Contains(f.logs(server), "dns-ready")
	})
}

// startAgent starts a runsc container on network (a podman --network
// value), as the sandbox shim would: --network=host inside that namespace.
func (f *netFixture) startAgent(name, network string) {
	args := []string{"--runtime", f.runsc, "--runtime-flag", "ignore-cgroups", "--runtime-flag", "network=host",
		"--network", network, "--security-opt", "no-new-privileges"}
	if strings.HasPrefix(network, "ns:") {
		// The sidecar's resolver, as the coordinator sets it (a container
		// joined with container: inherits the namespace owner's instead).
		args = append(args, "--dns", "127.0.0.1")
	}
	f.run(name, append(args, agentImage, "sleep", "900")...)
}

// controlNamespace starts the positive controls' side: a namespace with
// the sidecar's uplink and wiring but no netd (a runc container with
// NET_ADMIN), its own test host, and a runsc agent in it. Names start
// with prefix.
func (f *netFixture) controlNamespace(prefix string) (ns, server, agent string) {
	f.t.Helper()
	ns, server, agent = prefix+"-ctlns-"+f.suffix, prefix+"-ctlsrv-"+f.suffix, prefix+"-ctlagent-"+f.suffix
	f.run(ns, "--runtime", "runc", "--network", sidecar.DefaultUplink, "--cap-add", "NET_ADMIN", agentImage, "sleep", "900")
	f.startServer(server)
	f.wire(ns, server)
	f.startAgent(agent, "container:"+ns)
	return ns, server, agent
}

// netnsLinks lists the interfaces of the namespace pinned at path.
func netnsLinks(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("podman", "unshare", "nsenter", "--net="+path, "ip", "-br", "link").CombinedOutput()
	if err != nil {
		t.Fatalf("interfaces of %s: %v\n%s", path, err, out)
	}
	return string(out)
}

// probe runs the helper's probe in container; ok is its success.
func (f *netFixture) probe(container string, args ...string) (string, bool) {
	all := append([]string{"exec", "--env", netHelperEnv + "=probe", container, helperPath}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "podman", all...).CombinedOutput()
	return string(out), err == nil
}

// pair runs the same probe in the policy agent and in the control agent:
// the control must succeed (the probe can succeed), the agent must match
// wantAllowed.
func (f *netFixture) pair(t *testing.T, agent, control string, wantAllowed bool, args ...string) {
	t.Helper()
	if out, ok := f.probe(control, args...); !ok {
		t.Errorf("positive control %v failed without the policy: %s", args, out)
	}
	out, ok := f.probe(agent, args...)
	if ok != wantAllowed {
		t.Errorf("probe %v under the policy: success=%v, want %v: %s", args, ok, wantAllowed, out)
	}
}

func TestNetworkSidecar(t *testing.T) {
	f := newNetFixture(t)
	env, pol, a := netDomain(t, f, netTestConfig)
	ctx := context.Background()

	// Fail closed: a sidecar whose policy netd refuses never reports
	// ready, Started fails (the coordinator then tears the sandbox down)
	// and the namespace never gets an uplink.
	bad := sidecar.New(sidecar.Options{Anchor: a, Podman: f.pc, Image: netTestImage,
		Policy: netpolicy.Policy{AllowDomains: []netpolicy.Domain{{Pattern: "bad..name"}}}})
	spec0 := &podman.ContainerSpec{Network: "none"}
	err := bad.Prepare(ctx, spec0)
	if err == nil {
		err = bad.Started(ctx, "")
	}
	if !errors.Is(err, sidecar.ErrSidecarFailed) {
		t.Errorf("bad policy: Prepare/Started = %v; want ErrSidecarFailed", err)
	}
	if links := netnsLinks(t, a.Netns()); strings.Contains(links, "tap0") {
		t.Errorf("bad policy: the namespace got an uplink:\n%s", links)
	}
	bad.Close(ctx)

	comp := sidecar.New(sidecar.Options{Anchor: a, Policy: pol, Podman: f.pc, Image: netTestImage,
		Upstreams: []string{"192.0.2.53"}})
	t.Cleanup(func() { comp.Close(context.Background()) })
	agent := "lzt-net-agent-" + f.suffix
	spec := &podman.ContainerSpec{Name: agent, Image: agentImage}
	if err := comp.Prepare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if spec.Network != "ns:"+a.Netns() || !slices.Equal(spec.DNS, []string{"127.0.0.1"}) {
		t.Fatalf("Prepare set network %q, dns %q", spec.Network, spec.DNS)
	}
	// The agent starts beside the sidecar, as the coordinator starts it
	// (its create once the namespace is pinned: Ready); until Started the
	// namespace has no uplink.
	if err := comp.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	f.startAgent(agent, spec.Network)
	if err := comp.Started(ctx, agent); err != nil {
		t.Fatal(err)
	}
	// Positive control for the fail-closed check above: a sidecar that
	// reports ready gets its uplink.
	if links := netnsLinks(t, a.Netns()); !strings.Contains(links, "tap0") {
		t.Errorf("no uplink after Started:\n%s", links)
	}
	server := "lzt-net-srv-" + f.suffix
	f.startServer(server)
	f.wire(a.Sidecar(), server)

	// The control namespace: same wiring, no netd.
	ctlNS, ctlServer, ctlAgent := f.controlNamespace("lzt-net")

	t.Run("agent cannot reach the control socket", func(t *testing.T) {
		// Positive control: the socket exists on the host and answers.
		if _, err := os.Stat(a.NetdSocket()); err != nil {
			t.Fatalf("control socket on the host: %v", err)
		}
		if out, err := Podman(t, "exec", agent, "ls", filepath.Dir(a.NetdSocket())); err == nil {
			t.Errorf("the agent sees the runtime dir: %s", out)
		}
		mounts, err := Podman(t, "inspect", "--format", "{{range .Mounts}}{{.Source}} {{end}}", agent, a.Sidecar())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(mounts, filepath.Dir(a.NetdSocket())) {
			t.Errorf("runtime dir mounted into a container: %s", mounts)
		}
	})
	t.Run("resolv.conf points at netd", func(t *testing.T) {
		out, err := Podman(t, "exec", agent, "cat", "/etc/resolv.conf")
		if err != nil || strings.TrimSpace(out) != "nameserver 127.0.0.1" {
			t.Errorf("agent resolv.conf %q %v", out, err)
		}
	})
	t.Run("tcp allowed CIDR", func(t *testing.T) { f.pair(t, agent, ctlAgent, true, "tcp", "192.0.2.10:80") })
	t.Run("tcp denied address", func(t *testing.T) {
		f.pair(t, agent, ctlAgent, false, "tcp", "192.0.2.30:80")
		out, _ := f.probe(agent, "tcp", "192.0.2.30:80")
		t.Logf("agent: %s", strings.TrimSpace(out))
	})
	t.Run("tcp allowed ipv6", func(t *testing.T) { f.pair(t, agent, ctlAgent, true, "tcp", "[2001:db8::a]:80") })
	t.Run("tcp denied ipv6", func(t *testing.T) { f.pair(t, agent, ctlAgent, false, "tcp", "[2001:db8::30]:80") })
	t.Run("metadata inside allowed CIDR", func(t *testing.T) {
		f.pair(t, agent, ctlAgent, false, "tcp", "169.254.169.254:80")
	})
	t.Run("udp denied dropped", func(t *testing.T) {
		for _, c := range []struct{ ctr, srv string }{{ctlAgent, ctlServer}, {agent, server}} {
			f.probe(c.ctr, "udp", "192.0.2.30:9", "denied-"+c.ctr)
			// A datagram to an allowed address sent after it arrives after
			// it: once the marker is in, the denied one would be too.
			Eventually(t, 10*time.Second, "marker datagram", func() bool {
				f.probe(c.ctr, "udp", "192.0.2.10:9", "marker-"+c.ctr)
				return strings.Contains(f.logs(c.srv), "udp9 marker-"+c.ctr)
			})
			got := strings.Contains(f.logs(c.srv), "udp9 denied-"+c.ctr)
			if want := c.ctr == ctlAgent; got != want {
				t.Errorf("%s: denied datagram arrived=%v, want %v", c.ctr, got, want)
			}
		}
	})
	t.Run("dns to another server dropped", func(t *testing.T) {
		f.pair(t, agent, ctlAgent, false, "dns", "192.0.2.53:53", "direct.allowed.test")
		if strings.Contains(f.logs(server), "dns direct.allowed.test") {
			t.Error("the agent's direct query reached the DNS server")
		}
		if !strings.Contains(f.logs(ctlServer), "dns direct.allowed.test") {
			t.Error("control: the direct query did not reach the DNS server")
		}
	})
	t.Run("agent cannot borrow netd's upstream mark", func(t *testing.T) {
		// Positive control: a runc container with NET_ADMIN in the same
		// namespace can mark its socket, and the marked query gets through.
		peer := "lzt-net-markpeer-" + f.suffix
		f.run(peer, "--runtime", "runc", "--network", "container:"+a.Sidecar(), "--cap-drop", "ALL", "--cap-add", "NET_ADMIN", agentImage, "sleep", "900")
		if out, ok := f.probe(peer, "markdns", "192.0.2.53:53", "marked.allowed.test"); !ok {
			t.Errorf("control: marked query with NET_ADMIN failed: %s", out)
		}
		if out, ok := f.probe(peer, "dns", "192.0.2.53:53", "unmarked.allowed.test"); ok {
			t.Errorf("unmarked query from the runc peer got through: %s", out)
		}
		out, ok := f.probe(agent, "markdns", "192.0.2.53:53", "agentmark.allowed.test")
		if ok {
			t.Errorf("the agent marked its socket and got a DNS answer: %s", out)
		}
		t.Logf("agent: %s", strings.TrimSpace(out))
		if strings.Contains(f.logs(server), "dns agentmark.allowed.test") {
			t.Error("the agent's marked query reached the DNS server")
		}
	})
	t.Run("allowed name resolves and connects", func(t *testing.T) {
		// 192.0.3.20 is outside the allowed CIDRs: only the lookup opens it.
		if out, ok := f.probe(agent, "tcp", "192.0.3.20:80"); ok {
			t.Fatalf("192.0.3.20 reachable before any lookup: %s", out)
		}
		out, ok := f.probe(agent, "resolve", "allowed.test")
		if !ok || !strings.Contains(out, "addr 192.0.3.20") {
			t.Fatalf("resolve allowed.test: %s", out)
		}
		if out, ok := f.probe(agent, "tcp", "192.0.3.20:80"); !ok {
			t.Errorf("connect to the resolved address: %s", out)
		}
		if out, ok := f.probe(agent, "resolve", "www.wild.test"); !ok {
			t.Errorf("resolve www.wild.test (*.wild.test): %s", out)
		}
		// IPv6: 3ffe:20::20 is outside every allowed CIDR; its AAAA opens it.
		if out, ok := f.probe(agent, "tcp", "[3ffe:20::20]:80"); ok {
			t.Fatalf("3ffe:20::20 reachable before any lookup: %s", out)
		}
		if out, ok := f.probe(agent, "resolve6", "v6.allowed.test"); !ok || !strings.Contains(out, "addr 3ffe:20::20") {
			t.Fatalf("resolve6 v6.allowed.test: %s", out)
		}
		if out, ok := f.probe(agent, "tcp", "[3ffe:20::20]:80"); !ok {
			t.Errorf("connect to the resolved IPv6 address: %s", out)
		}
	})
	t.Run("other name NXDOMAIN", func(t *testing.T) {
		// Control: the upstream answers the name.
		if out, ok := f.probe(ctlAgent, "dns", "192.0.2.53:53", "other.test"); !ok || !strings.Contains(out, "answers 1") {
			t.Errorf("control: upstream does not answer other.test: %s", out)
		}
		out, ok := f.probe(agent, "resolve", "other.test")
		if ok || !strings.Contains(out, "no such host") {
			t.Errorf("other.test under the policy: %s", out)
		}
		// A high-entropy name under an allowed wildcard is never forwarded.
		exfil := "mzxw6ytboi4dkmrtgq2dkzjrg4ydcnzq.wild.test"
		if out, ok := f.probe(agent, "resolve", exfil); ok {
			t.Errorf("high-entropy name resolved: %s", out)
		}
		if logs := f.logs(server); strings.Contains(logs, "dns other.test") || strings.Contains(logs, "dns "+exfil) {
			t.Error("a refused name was forwarded upstream")
		}
	})
	t.Run("agent cannot change the rules", func(t *testing.T) {
		// Positive controls run in the control namespace's runc container,
		// which has NET_ADMIN: the same helper can flush and route there.
		for _, p := range []string{"nftflush", "route"} {
			if out, ok := f.probe(ctlNS, p); !ok {
				t.Errorf("control: %s with NET_ADMIN failed: %s", p, out)
			}
			out, ok := f.probe(agent, p)
			if ok {
				t.Errorf("agent could %s: %s", p, out)
			}
			t.Logf("agent %s: %s", p, strings.TrimSpace(out))
		}
		if out, ok := f.probe(agent, "tcp", "192.0.2.30:80"); ok {
			t.Errorf("denied address reachable after the attempts: %s", out)
		}
	})
	t.Run("net status shows denials", func(t *testing.T) {
		out := env.MustRun("net", "status")
		for _, want := range []string{"tcp 192.0.2.30:80", "tcp [2001:db8::30]:80", "tcp 169.254.169.254:80", "dns other.test", "192.0.3.20"} {
			if !strings.Contains(out, want) {
				t.Errorf("net status lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("net allow opens a CIDR live; reload keeps established flows", func(t *testing.T) {
		if _, ok := f.probe(agent, "tcp", "192.0.2.30:80"); ok {
			t.Fatal("192.0.2.30 already allowed")
		}
		env.MustRun("net", "allow", "192.0.2.30/32")
		if out, ok := f.probe(agent, "tcp", "192.0.2.30:80"); !ok {
			t.Fatalf("after net allow: %s", out)
		}
		hold := exec.Command("podman", "exec", "--env", netHelperEnv+"=probe", agent, helperPath, "hold", "192.0.2.30:7", "4")
		var holdOut strings.Builder
		hold.Stdout, hold.Stderr = &holdOut, &holdOut
		if err := hold.Start(); err != nil {
			t.Fatal(err)
		}
		Eventually(t, 20*time.Second, "held connection", func() bool { return strings.Contains(holdOut.String(), "connected") })
		// The configuration does not list 192.0.2.30: the reload removes it.
		env.MustRun("net", "reload")
		if out, ok := f.probe(agent, "tcp", "192.0.2.30:80"); ok {
			t.Errorf("new connection allowed after reload: %s", out)
		}
		if err := hold.Wait(); err != nil {
			t.Errorf("established connection broken by the reload: %v\n%s", err, holdOut.String())
		}
		env.MustRun("net", "allow", "192.0.2.30", "--for", "1s")
		Eventually(t, 20*time.Second, "temporary allow to expire", func() bool {
			_, ok := f.probe(agent, "tcp", "192.0.2.30:80")
			return !ok
		})
	})
	t.Run("killing netd leaves the namespace closed", func(t *testing.T) {
		pid, _ := strconv.Atoi(f.pid(a.Sidecar()))
		if pid <= 0 {
			t.Fatal("no sidecar pid")
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		Eventually(t, 20*time.Second, "sidecar to exit", func() bool {
			out, _ := Podman(t, "inspect", "--format", "{{.State.Status}}", a.Sidecar())
			return strings.TrimSpace(out) != "running"
		})
		f.pair(t, agent, ctlAgent, false, "tcp", "192.0.2.30:80")
		f.pair(t, agent, ctlAgent, false, "tcp", "[2001:db8::30]:80")
		if out, ok := f.probe(agent, "resolve", "allowed.test"); ok {
			t.Errorf("names resolve without netd: %s", out)
		}
		// No live policy is claimed: an error, or (with no coordinator,
		// as here) the configured policy of a sandbox that is not running.
		if r := env.Run("net", "status"); r.Code == 0 && !strings.Contains(r.Stdout, "not running") {
			t.Errorf("net status answers without netd: %s", r.Stdout)
		}
	})
}

// TestNetdFailsClosedWithoutNetAdmin: without NET_ADMIN the ruleset cannot
// be installed and lazaret-netd exits non-zero (the sandbox never starts).
// Positive control: the same container with NET_ADMIN stays up.
func TestNetdFailsClosedWithoutNetAdmin(t *testing.T) {
	f := newNetFixture(t)
	if err := netdimage.BuildImage(context.Background(), f.pc, filepath.Join(binDir(t), "lazaret-netd"), netTestImage); err != nil {
		t.Fatal(err)
	}
	base := []string{"run", "--rm", "--runtime", "runc", "--network", sidecar.DefaultUplink, "--mount", "type=tmpfs,destination=/run",
		"--cap-drop", "ALL", "--cap-add", "NET_BIND_SERVICE"}
	out, err := Podman(t, append(base, netTestImage, "--control", "/run/netd.sock")...)
	if err == nil || !strings.Contains(err.Error(), "install nftables ruleset") {
		t.Errorf("without NET_ADMIN: want a failed install, got %v %s", err, out)
	}
	name := "lzt-net-capok-" + f.suffix
	if out, err := Podman(t, "run", "-d", "--replace", "--name", name, "--runtime", "runc", "--network", sidecar.DefaultUplink,
		"--mount", "type=tmpfs,destination=/run", "--cap-drop", "ALL", "--cap-add", "NET_BIND_SERVICE", "--cap-add", "NET_ADMIN",
		netTestImage, "--control", "/run/netd.sock"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	defer Podman(t, "rm", "-f", "-t", "0", name)
	Eventually(t, 10*time.Second, "netd ready", func() bool { return strings.Contains(f.logs(name), "msg=ready") })
	if st, _ := Podman(t, "inspect", "--format", "{{.State.Status}}", name); strings.TrimSpace(st) != "running" {
		t.Errorf("with NET_ADMIN: %s %s", st, f.logs(name))
	}

}

// TestNetworkThroughCoordinator: a sandbox started by `lazaret exec` runs
// behind its sidecar (the coordinator registers the component), `lazaret
// net` reaches it while it runs, and teardown removes the sidecar (the
// spare it leaves goes with `lazaret stop`).
func TestNetworkThroughCoordinator(t *testing.T) {
	env := NewEnv(t)
	env.WriteConfig("[network]\nallow_egress = [\"192.0.2.0/28\"]\n")
	out := env.MustRun("exec", "--", "cat", "/etc/resolv.conf")
	if strings.TrimSpace(out) != "nameserver 127.0.0.1" {
		t.Errorf("sandbox resolv.conf %q", out)
	}
	// The policy's own positive controls are in TestNetworkSidecar; this
	// test checks the wiring through the coordinator. (Nothing is sent to
	// 198.51.100.9 once it is allowed: it would leave the machine.)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hold := env.Cmd(ctx, "exec", "--", "sleep", "60")
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { hold.Process.Kill(); hold.Wait() }()
	Eventually(t, 60*time.Second, "net status to answer", func() bool { return netRunning(env) })
	r := env.Run("exec", "--", "bash", "-c", "echo > /dev/tcp/198.51.100.9/443")
	if r.Code == 0 || !strings.Contains(r.Stderr+r.Stdout, "No route to host") {
		t.Errorf("denied connect: exit %d, %s %s", r.Code, r.Stdout, r.Stderr)
	}
	Eventually(t, 10*time.Second, "denial in net status", func() bool {
		return strings.Contains(env.Run("net", "status").Stdout, "tcp 198.51.100.9:443")
	})
	env.MustRun("net", "allow", "198.51.100.0/24", "--for", "10m")
	if st := env.MustRun("net", "status", "--json"); !strings.Contains(st, "198.51.100.0/24") {
		t.Errorf("allowed CIDR missing from status: %s", st)
	}
	cfg, err := config.Load(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := domain.RuntimeDir()
	a, err := domain.New("default", env.Workspace, cfg.DataRoot, rt, "")
	if err != nil {
		t.Fatal(err)
	}
	// This sandbox claimed the spare its first exec left (spare_test.go):
	// the claim carried the policy that denied and the `net allow` above.
	running, _ := Podman(t, "inspect", "--format", "{{.Id}}", a.Sidecar())
	// The last session ends: the coordinator tears the sandbox down,
	// and leaves a new spare for the next start.
	hold.Process.Kill()
	hold.Wait()
	Eventually(t, 60*time.Second, "coordinator gone", func() bool {
		_, err := os.Stat(a.ControlSocket())
		return errors.Is(err, os.ErrNotExist)
	})
	if now, _ := Podman(t, "inspect", "--format", "{{.Id}}", a.Sidecar()); strings.TrimSpace(now) == strings.TrimSpace(running) {
		t.Errorf("the sandbox's sidecar %s outlived its teardown", now)
	}
	if uplinkRunning(a.Netns()) {
		t.Error("the namespace kept its uplink after the teardown")
	}
	// With no spare, the sidecar, its socket and the namespace pin go.
	env.MustRun("stop")
	Eventually(t, 30*time.Second, "sidecar removed", func() bool {
		_, err := Podman(t, "container", "exists", a.Sidecar())
		return err != nil
	})
	for _, p := range []string{a.NetdSocket(), a.Netns()} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left: %v", p, err)
		}
	}
}

// TestNetworkSidecarImageRebuild: the default sidecar image is the content
// tag of the installed lazaret-netd; a missing one is built at start (no
// check otherwise: another binary has another tag) and older content tags
// are pruned then. A missing explicit image is an error naming the fix.
func TestNetworkSidecarImageRebuild(t *testing.T) {
	f := newNetFixture(t)
	env := NewEnv(t)
	ctx := context.Background()
	installed := filepath.Join(binDir(t), "lazaret-netd")
	t.Setenv("LAZARET_NETD", installed)
	rt, err := domain.RuntimeDir()
	if err != nil {
		t.Fatal(err)
	}
	a, err := domain.New("default", env.Workspace, env.DataRoot, rt, "")
	if err != nil {
		t.Fatal(err)
	}
	start := func(o sidecar.Options) error {
		o.Anchor, o.Podman, o.Upstreams = a, f.pc, []string{"192.0.2.53"}
		comp := sidecar.New(o)
		err := comp.Prepare(ctx, &podman.ContainerSpec{Network: "none"})
		if err == nil {
			err = comp.Started(ctx, "")
		}
		if cerr := comp.Close(ctx); cerr != nil {
			t.Errorf("Close: %v", cerr)
		}
		return err
	}

	missing := netdimage.ImageName + ":lzt-missing-" + f.suffix
	if err := start(sidecar.Options{Image: missing}); !errors.Is(err, sidecar.ErrSidecarFailed) || !strings.Contains(err.Error(), "lazaret image build") {
		t.Errorf("missing explicit image: %v; want ErrSidecarFailed naming `lazaret image build`", err)
	}

	// An older content tag (another binary: the installed one with bytes
	// appended, still a static ELF) is pruned when the new one is built.
	other := filepath.Join(t.TempDir(), "lazaret-netd")
	b, err := os.ReadFile(installed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, append(b, "older build"...), 0o755); err != nil {
		t.Fatal(err)
	}
	old := netdimage.ImageName + ":lzt-old-0123456789ab"
	if err := netdimage.BuildImage(ctx, f.pc, other, old); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.pc.RemoveImage(context.Background(), old) })
	// Rebuilding a tag in place leaves the earlier image untagged; such
	// images are pruned with the old tags.
	if err := netdimage.BuildImage(ctx, f.pc, other, old); err != nil {
		t.Fatal(err)
	}
	dangling := func() string {
		out, err := Podman(t, "images", "--quiet", "--filter", "dangling=true", "--filter", "label=org.opencontainers.image.title=lazaret-netd")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	if dangling() == "" {
		t.Fatal("control: rebuilding a tag left no untagged sidecar image")
	}
	ref, _, err := netdimage.InstalledImageRef()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.pc.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := start(sidecar.Options{}); err != nil {
		t.Errorf("missing content-tagged image: %v", err)
	}
	if ok, err := imageHolds(ctx, f.pc, ref, installed); err != nil || !ok {
		t.Errorf("content-tagged image %s after the start: holds the installed binary %v, %v", ref, ok, err)
	}
	if ok, _ := f.pc.ImageExists(ctx, old); ok {
		t.Errorf("older content tag %s not pruned", old)
	}
	if d := dangling(); d != "" {
		t.Errorf("untagged sidecar images not pruned: %s", d)
	}
}

// netDomain builds the netd test image, loads the config text cfg into a
// fresh Env and returns that Env, the default profile's policy and its
// Domain Anchor (the one the CLI derives in env.Workspace, so `lazaret net`
// reaches a sidecar started for it).
func netDomain(t *testing.T, f *netFixture, cfg string) (*Env, netpolicy.Policy, *domain.Anchor) {
	t.Helper()
	env := NewEnv(t)
	env.WriteConfig(cfg)
	if err := netdimage.BuildImage(context.Background(), f.pc, filepath.Join(binDir(t), "lazaret-netd"), netTestImage); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := c.Profile("default")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := sidecar.PolicyOf(prof)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := domain.RuntimeDir()
	if err != nil {
		t.Fatal(err)
	}
	a, err := domain.New("default", env.Workspace, c.DataRoot, rt, "")
	if err != nil {
		t.Fatal(err)
	}
	return env, pol, a
}

// imageHolds reports whether the sidecar image tag holds the lazaret-netd
// binary at bin (its label carries the binary's SHA-256).
func imageHolds(ctx context.Context, pc *podman.Client, tag, bin string) (bool, error) {
	info, err := pc.InspectImage(ctx, tag)
	if err != nil {
		return false, err
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(b)
	return info.Labels[netdimage.BinaryLabel] == hex.EncodeToString(sum[:]), nil
}
