//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// Security tests of the network sidecar (SECURITY.md, class "network"):
// what an allowed name's DNS answer may open, and what a dead netd leaves.
// They reuse the fixture of network_test.go: a real runc sidecar and a
// runsc agent in its namespace, a test host wired by veth, and a control
// namespace wired the same way without netd.

// secNet is one sidecar under test with its agent, test host and control.
type secNet struct {
	f                       *netFixture
	a                       *domain.Anchor
	comp                    *sidecar.Component
	agent, ctlAgent, server string
}

// newSecNet starts a sidecar with the policy of config text cfg; netd is
// told hostAddrs are the host's addresses.
func newSecNet(t *testing.T, tag, cfg string, hostAddrs []netip.Addr) *secNet {
	t.Helper()
	f := newNetFixture(t)
	f.suffix = tag + "-" + f.suffix
	_, pol, a := netDomain(t, f, cfg)
	ctx := context.Background()
	s := &secNet{f: f, agent: "lzt-sec-agent-" + f.suffix, server: "lzt-sec-srv-" + f.suffix, a: a}
	s.comp = sidecar.New(sidecar.Options{Anchor: s.a, Policy: pol, Podman: f.pc, Image: netTestImage, Upstreams: []string{"192.0.2.53"},
		HostAddrs: func() ([]netip.Addr, error) { return hostAddrs, nil }})
	t.Cleanup(func() { s.comp.Close(context.Background()) })
	spec := &podman.ContainerSpec{Name: s.agent, Image: agentImage}
	if err := s.comp.Prepare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	// The namespace is pinned once Ready returns (the coordinator's start
	// gate waits for it the same way).
	if err := s.comp.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	f.startAgent(s.agent, spec.Network)
	if err := s.comp.Started(ctx, s.agent); err != nil {
		t.Fatal(err)
	}
	f.startServer(s.server)
	f.wire(s.a.Sidecar(), s.server)
	_, _, s.ctlAgent = f.controlNamespace("lzt-sec")
	return s
}

// resolved is the set of addresses netd has opened for names.
func (s *secNet) resolved(t *testing.T) map[string]string {
	t.Helper()
	st, err := sidecar.Client(s.a).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, r := range st.Resolved {
		m[r.Addr] = r.Name
	}
	return m
}

// TestSecNetworkDNSAnswerFilter: an allowed name whose answer points at
// metadata, loopback, slirp's gateway or resolver, a private LAN, a
// documentation range, the host's own address, or an IPv4-mapped, NAT64
// or 6to4 form of a denied address opens none of them, and a record for a
// name not asked opens nothing. Positive controls: every denied test-host
// address is reachable from the control namespace (so the probe can
// succeed); public answers (192.0.3.20, 192.0.3.21 at the end of a CNAME
// chain, with TTL 0) are opened and reachable; and the host's address is
// opened by the same answer once netd is told the host no longer has it.
func TestSecNetworkDNSAnswerFilter(t *testing.T) {
	host := netip.MustParseAddr("192.0.3.30")
	s := newSecNet(t, "dns", "[network]\nallow_domains = [\"*.allowed.test\"]\n", []netip.Addr{host})
	f := s.f
	never := map[string][]string{ // name → addresses that must stay closed
		"meta.allowed.test":       {"169.254.169.254", "fd00:ec2::254"},
		"loop.allowed.test":       {"127.0.0.1", "::1"},
		"slirp.allowed.test":      {"10.0.2.2", "10.0.2.3", "fd00::2", "fd00::3"},
		"lan.allowed.test":        {"192.168.1.1", "10.1.2.3", "172.16.0.1", "100.64.0.1", "fd12::1"},
		"doc.allowed.test":        {"192.0.2.30", "2001:db8::30"},
		"host.allowed.test":       {"192.0.3.30"},
		"mapped.allowed.test":     {"::ffff:169.254.169.254", "::ffff:192.0.3.30", "169.254.169.254", "192.0.3.30"},
		"nat64.allowed.test":      {"64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1"},
		"sixtofour.allowed.test":  {"2002:a9fe:a9fe::1", "2002:c000:31e::1"},
		"mixed.allowed.test":      {"169.254.169.254", "127.0.0.1", "192.0.2.30"},
		"cnametrick.allowed.test": {"192.0.3.31"},
	}
	for name := range never {
		f.probe(s.agent, "resolve", name)
		f.probe(s.agent, "resolve6", name)
	}
	opened := s.resolved(t)
	for name, addrs := range never {
		for _, a := range addrs {
			if by, ok := opened[a]; ok {
				t.Errorf("%s (answered for %s) opened by %s", a, name, by)
			}
		}
	}
	// The denied addresses that test hosts carry are reachable without
	// netd and closed with it.
	for _, dst := range []string{"192.0.2.30:80", "[2001:db8::30]:80", "192.0.3.30:80", "192.0.3.31:80", "169.254.169.254:80"} {
		f.pair(t, s.agent, s.ctlAgent, false, "tcp", dst)
	}
	// Public answers are opened: mixed.* and the CNAME chain's end.
	for _, want := range []string{"192.0.3.20", "192.0.3.21"} {
		if _, ok := opened[want]; !ok {
			t.Errorf("public answer %s not opened; opened %v", want, opened)
		}
	}
	f.pair(t, s.agent, s.ctlAgent, true, "tcp", "192.0.3.20:80")
	f.pair(t, s.agent, s.ctlAgent, true, "tcp", "192.0.3.21:80")

	st, err := sidecar.Client(s.a).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.HostAddrs, []netip.Addr{host}) {
		t.Errorf("netd's host addresses %v, want [%s]", st.HostAddrs, host)
	}
	var counted bool
	for _, d := range st.Denials {
		counted = counted || strings.Contains(d.Dest, "host.allowed.test -> 192.0.3.30")
	}
	if !counted {
		t.Errorf("refused host address not among the denials: %+v", st.Denials)
	}

	// Positive control for the host filter: the same answer, once netd
	// no longer counts 192.0.3.30 as the host's, opens it.
	if err := sidecar.Client(s.a).SetHostAddrs(context.Background(), nil, "test"); err != nil {
		t.Fatal(err)
	}
	if out, ok := f.probe(s.agent, "resolve", "host.allowed.test"); !ok {
		t.Fatalf("resolve host.allowed.test: %s", out)
	}
	if out, ok := f.probe(s.agent, "tcp", "192.0.3.30:80"); !ok {
		t.Errorf("control: the host-address answer did not open 192.0.3.30 without the filter: %s", out)
	}
	// Told again (the coordinator's refresh), it is closed at once.
	if err := sidecar.Client(s.a).SetHostAddrs(context.Background(), []netip.Addr{host}, "test"); err != nil {
		t.Fatal(err)
	}
	if out, ok := f.probe(s.agent, "tcp", "192.0.3.30:80"); ok {
		t.Errorf("192.0.3.30 still open after it became a host address again: %s", out)
	}
}

// TestSecNetworkHostAddressNeverOpened: the host's own address (192.0.3.30
// here, as netd is told) stays closed inside an allowed CIDR, and
// `lazaret net allow` of it is refused, so a denial notice the agent
// provokes by dialling the host cannot lead the user into opening it (the
// notice offers no allow command for it). Positive controls: the address
// is reachable from the control namespace; another address of the same
// allowed CIDR is reachable from the agent; and once netd no longer counts
// 192.0.3.30 as the host's, the agent reaches it.
func TestSecNetworkHostAddressNeverOpened(t *testing.T) {
	host := netip.MustParseAddr("192.0.3.30")
	s := newSecNet(t, "host", "[network]\nallow_egress = [\"192.0.3.0/24\"]\n", []netip.Addr{host})
	f, cl, ctx := s.f, sidecar.Client(s.a), context.Background()
	f.pair(t, s.agent, s.ctlAgent, false, "tcp", "192.0.3.30:80")
	f.pair(t, s.agent, s.ctlAgent, true, "tcp", "192.0.3.31:80")
	if _, err := cl.Allow(ctx, "192.0.3.30", 0, "test"); err == nil || !strings.Contains(err.Error(), "never opens it") {
		t.Errorf("allowing the host's address: %v", err)
	}
	if out, ok := f.probe(s.agent, "tcp", "192.0.3.30:80"); ok {
		t.Errorf("the host's address opened after the refused allow: %s", out)
	}
	// The denial's event carries the reason, which makes the notice offer
	// no allow command.
	evs, _, err := cl.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var notice string
	for _, ev := range evs {
		if ev.Dest == "tcp 192.0.3.30:80" {
			notice = sidecar.Notice("default", ev)
		}
	}
	if notice == "" || strings.Contains(notice, "net allow") || !strings.Contains(notice, "an address of this host") {
		t.Errorf("notice of the host's address: %q (events %+v)", notice, evs)
	}
	// Control: the same address, no longer the host's, is reached.
	if err := cl.SetHostAddrs(ctx, nil, "test"); err != nil {
		t.Fatal(err)
	}
	if out, ok := f.probe(s.agent, "tcp", "192.0.3.30:80"); !ok {
		t.Errorf("control: 192.0.3.30 inside the allowed CIDR closed once not the host's: %s", out)
	}
}

// TestSecNetworkNetdKilledCutsEgress: SIGKILL of lazaret-netd makes an
// allowed destination unreachable, and it stays so: the sidecar's Watch
// (what the coordinator runs) sees the death, stops the uplink and
// deletes every interface of the namespace but loopback. Positive
// control: before the kill the destination is reachable, and it stays
// reachable from the control namespace throughout.
func TestSecNetworkNetdKilledCutsEgress(t *testing.T) {
	s := newSecNet(t, "kill", "[network]\nallow_egress = [\"192.0.2.0/28\"]\n", nil)
	pid, _ := strconv.Atoi(s.f.pid(s.a.Sidecar()))
	s.killAndExpectCut(t, pid, "lazaret-netd")
}

// TestSecNetworkUplinkKilledCutsEgress: the same when slirp4netns dies
// (the uplink is the sidecar's too).
func TestSecNetworkUplinkKilledCutsEgress(t *testing.T) {
	s := newSecNet(t, "slirp", "[network]\nallow_egress = [\"192.0.2.0/28\"]\n", nil)
	s.killAndExpectCut(t, uplinkPID(t, s.a.Netns()), "slirp4netns")
}

// killAndExpectCut checks that an allowed destination is reachable, kills
// pid, and checks that Watch reports the death naming what, and that the
// destination is then unreachable on every try while the control still
// reaches it, with no interface but loopback left in the namespace.
func (s *secNet) killAndExpectCut(t *testing.T, pid int, what string) {
	t.Helper()
	s.f.pair(t, s.agent, s.ctlAgent, true, "tcp", "192.0.2.10:80")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watched := make(chan error, 1)
	go func() { watched <- s.comp.Watch(ctx) }()
	if pid <= 0 {
		t.Fatalf("no pid for %s", what)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-watched:
		if !errors.Is(err, sidecar.ErrSidecarDied) || !strings.Contains(err.Error(), what) {
			t.Fatalf("Watch after killing %s: %v", what, err)
		}
		t.Logf("Watch: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatalf("Watch did not see %s die", what)
	}
	for range 3 {
		s.f.pair(t, s.agent, s.ctlAgent, false, "tcp", "192.0.2.10:80")
	}
	if links := strings.Fields(netnsLinks(t, s.a.Netns())); len(links) == 0 || links[0] != "lo" || slices.ContainsFunc(links, func(l string) bool {
		return strings.HasPrefix(l, "lzv") || strings.HasPrefix(l, "tap")
	}) {
		t.Errorf("interfaces left in the namespace:\n%s", links)
	}
}

// uplinkPID finds the slirp4netns the sidecar attached to the namespace
// pinned at pin (its argv names the pin, unique to the test's domain).
func uplinkPID(t *testing.T, pin string) int {
	t.Helper()
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		if filepath.Base(argv[0]) == "slirp4netns" && slices.Contains(argv, pin) {
			return pid
		}
	}
	t.Fatalf("no slirp4netns for %s", pin)
	return 0
}

// TestSecNetworkSidecarDeathStopsSandbox: through the coordinator, a
// killed lazaret-netd stops the sandbox: the attached session is told in
// one line naming netd, `lazaret status` no longer reports it running,
// and the audit trail's sandbox.stop says why. Positive control: before
// the kill the session runs, an allowed test host answers from inside
// the sandbox, and netd was given the host's real addresses.
func TestSecNetworkSidecarDeathStopsSandbox(t *testing.T) {
	f := newNetFixture(t)
	env := NewEnv(t)
	env.WriteConfig("[network]\nallow_egress = [\"192.0.2.0/28\"]\n")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hold := env.Cmd(ctx, "exec", "--", "sleep", "300")
	var holdErr strings.Builder
	hold.Stderr = &holdErr
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { hold.Process.Kill(); hold.Wait() }()
	Eventually(t, 90*time.Second, "net status to answer", func() bool { return netRunning(env) })
	rt, _ := domain.RuntimeDir()
	a, err := domain.New("default", env.Workspace, env.DataRoot, rt, "")
	if err != nil {
		t.Fatal(err)
	}
	server := "lzt-secd-srv-" + f.suffix
	f.startServer(server)
	f.wire(a.Sidecar(), server)
	if out := env.MustRun("exec", "--", "bash", "-c", "exec 3<>/dev/tcp/192.0.2.10/80; head -1 <&3"); strings.TrimSpace(out) != "ok" {
		t.Fatalf("control: allowed test host from the sandbox: %q", out)
	}
	var st netdapi.Status
	if err := json.Unmarshal([]byte(env.MustRun("net", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	ifaddrs, _ := net.InterfaceAddrs()
	for _, ia := range ifaddrs {
		p, err := netip.ParsePrefix(ia.String())
		if err == nil && !slices.Contains(st.HostAddrs, p.Addr().Unmap()) {
			t.Errorf("host address %s not given to netd (it has %v)", p.Addr(), st.HostAddrs)
		}
	}
	if out := env.MustRun("status"); !strings.Contains(out, "pid") || strings.Contains(out, "shutting down") {
		t.Fatalf("control: the sandbox does not run:\n%s", out)
	}

	pid, _ := strconv.Atoi(f.pid(a.Sidecar()))
	if pid <= 0 {
		t.Fatal("no sidecar pid")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	werr := hold.Wait()
	// The start's direct-mode notice aside, the session's stderr is the one line.
	lines := slices.DeleteFunc(strings.Split(strings.TrimSpace(holdErr.String()), "\n"), func(l string) bool {
		return strings.HasPrefix(l, "lazaret: direct mode:")
	})
	if werr == nil || len(lines) != 1 || !strings.Contains(lines[0], "session ended") || !strings.Contains(lines[0], "netd failed") {
		t.Errorf("the session was not told in one line: %v\n%s", werr, holdErr.String())
	}
	t.Logf("session: %s", holdErr.String())
	Eventually(t, 60*time.Second, "the sandbox to stop", func() bool {
		return strings.HasPrefix(env.MustRun("status"), "not running:") // the reason may say "not running" too
	})
	audit := env.MustRun("audit", "--json")
	if !strings.Contains(audit, "sandbox.stop") || !strings.Contains(audit, "component netd failed") {
		t.Errorf("audit trail lacks the reason:\n%s", audit)
	}
	if _, err := Podman(t, "container", "exists", a.Container()); err == nil {
		t.Error("the agent container still exists")
	}
}
