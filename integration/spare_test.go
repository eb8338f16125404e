//go:build integration

package integration

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/netns"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// The spare network sidecar: a sandbox that ends leaves a fresh netd for
// the domain's next start, which claims it instead of starting one
// (docs/LIFECYCLE.md). These tests check that a spare opens nothing
// before its claim, that the claim installs the starting sandbox's policy
// and host addresses (with positive controls: the same probes from a
// namespace without netd succeed), that a spare started otherwise is
// replaced, not claimed, and that an unclaimed one goes away.

// sidecarID is the ID of the domain's sidecar container, "" when none.
func sidecarID(t *testing.T, a *domain.Anchor) string {
	t.Helper()
	out, err := Podman(t, "inspect", "--format", "{{.Id}}", a.Sidecar())
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// domainContainers lists the names of the domain's containers.
func domainContainers(t *testing.T, a *domain.Anchor) []string {
	t.Helper()
	out, _ := Podman(t, "ps", "-a", "--filter", "label="+domain.LabelKey+"="+a.Hash, "--format", "{{.Names}}")
	return strings.Fields(out)
}

func TestSpareSidecarClaim(t *testing.T) {
	f := newNetFixture(t)
	_, _, a := netDomain(t, f, netTestConfig)
	ctx := context.Background()
	opts := func(p netpolicy.Policy, upstream string, expiry time.Duration) sidecar.Options {
		return sidecar.Options{Anchor: a, Policy: p, Podman: f.pc, Image: netTestImage,
			Upstreams: []string{upstream}, SpareExpiry: expiry,
			HostAddrs: func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("192.0.2.20")}, nil }}
	}
	start := func(c *sidecar.Component, agent string) {
		t.Helper()
		spec := &podman.ContainerSpec{Name: agent, Image: agentImage}
		if err := c.Prepare(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := c.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		f.startAgent(agent, spec.Network)
		if err := c.Started(ctx, agent); err != nil {
			t.Fatal(err)
		}
	}

	// stop ends a sandbox as the coordinator does: the agent, then the
	// sidecar's Close.
	stop := func(c *sidecar.Component, agent string) {
		t.Helper()
		Podman(t, "rm", "-f", "-t", "0", agent)
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// A spare: running, labelled, and in a namespace with no way out.
	if err := sidecar.New(opts(netpolicy.Policy{}, "192.0.2.53", 10*time.Minute)).StartSpare(ctx); err != nil {
		t.Fatal(err)
	}
	spareID := sidecarID(t, a)
	if spareID == "" {
		t.Fatal("no spare sidecar after StartSpare")
	}
	t.Cleanup(func() { Podman(t, "rm", "-f", "-t", "0", a.Sidecar()) })
	if out, _ := Podman(t, "inspect", "--format", `{{index .Config.Labels "`+domain.LabelSpare+`"}}`, a.Sidecar()); strings.TrimSpace(out) != a.DataRoot {
		t.Errorf("spare's %s label %q, want %q", domain.LabelSpare, strings.TrimSpace(out), a.DataRoot)
	}
	if links := netnsLinks(t, a.Netns()); strings.Contains(links, "tap0") {
		t.Errorf("the spare's namespace has an uplink before any claim:\n%s", links)
	}

	// The claim: the same container, now with the sandbox's policy
	// (192.0.2.0/24, not the spare's empty one) and host addresses.
	pol, err := netpolicy.FromConfig([]netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	comp := sidecar.New(opts(pol, "192.0.2.53", 10*time.Minute))
	agent := "lzt-spare-agent-" + f.suffix
	start(comp, agent)
	t.Cleanup(func() { comp.Close(context.Background()) })
	if id := sidecarID(t, a); id != spareID {
		t.Fatalf("the start did not claim the spare: sidecar %s, spare %s", id, spareID)
	}
	if links := netnsLinks(t, a.Netns()); !strings.Contains(links, "tap0") {
		t.Errorf("no uplink after the claim:\n%s", links)
	}
	server := "lzt-spare-srv-" + f.suffix
	f.startServer(server)
	f.wire(a.Sidecar(), server)
	_, _, ctlAgent := f.controlNamespace("lzt-spare")
	f.pair(t, agent, ctlAgent, true, "tcp", "192.0.2.30:80")  // the claim's policy is installed
	f.pair(t, agent, ctlAgent, false, "tcp", "192.0.2.20:80") // the claim's host address is never opened
	f.pair(t, agent, ctlAgent, false, "tcp", "[2001:db8::a]:80")
	st, err := sidecar.Client(a).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.HostAddrs) != 1 || st.HostAddrs[0] != netip.MustParseAddr("192.0.2.20") {
		t.Errorf("claimed netd's host addresses: %v", st.HostAddrs)
	}
	stop(comp, agent)

	// A spare started for other upstreams is not claimed: the start
	// replaces it, and only one sidecar is left.
	if err := comp.StartSpare(ctx); err != nil {
		t.Fatal(err)
	}
	spareID = sidecarID(t, a)
	other := sidecar.New(opts(pol, "192.0.2.54", 10*time.Minute))
	start(other, agent)
	t.Cleanup(func() { other.Close(context.Background()) })
	if id := sidecarID(t, a); id == "" || id == spareID {
		t.Errorf("a spare of other upstreams was claimed (sidecar %s, spare %s)", id, spareID)
	}
	if ctrs := domainContainers(t, a); len(ctrs) != 1 {
		t.Errorf("domain containers after replacing the spare: %v", ctrs)
	}
	stop(other, agent)

	// A spare whose namespace pin is gone (podman's namespaces were
	// recreated) is not claimed: the agent could not join it.
	if err := other.StartSpare(ctx); err != nil {
		t.Fatal(err)
	}
	spareID = sidecarID(t, a)
	if out, err := Podman(t, "unshare", "umount", a.Netns()); err != nil {
		t.Fatalf("unpinning: %v %s", err, out)
	}
	unpinned := sidecar.New(opts(pol, "192.0.2.53", 10*time.Minute))
	start(unpinned, agent)
	if id := sidecarID(t, a); id == "" || id == spareID {
		t.Errorf("a spare without its pin was claimed (sidecar %s, spare %s)", id, spareID)
	}
	if links := netnsLinks(t, a.Netns()); !strings.Contains(links, "tap0") {
		t.Errorf("no uplink for the start after an unpinned spare:\n%s", links)
	}
	stop(unpinned, agent)

	// An unclaimed spare exits at its expiry and podman removes it; the
	// next start makes its own namespace and sidecar over what it left.
	short := sidecar.New(opts(pol, "192.0.2.53", 2*time.Second))
	if err := short.StartSpare(ctx); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "the expired spare to be removed", func() bool { return sidecarID(t, a) == "" })
	start(short, agent)
	if links := netnsLinks(t, a.Netns()); !strings.Contains(links, "tap0") {
		t.Errorf("no uplink for the start after an expired spare:\n%s", links)
	}
	stop(short, agent)
	for _, p := range []string{a.NetdSocket(), a.Netns()} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left after Close", p)
		}
	}
}

// TestSpareSidecarLifecycle: through the CLI, the end of a sandbox leaves
// a spare, the next start claims it, `lazaret stop` and `stop --all`
// remove it with its runtime files, LAZARET_SPARE_SIDECAR=off leaves
// none, and a bad value is a one-line error that leaves nothing behind.
func TestSpareSidecarLifecycle(t *testing.T) {
	f := newNetFixture(t)
	env, _, a := netDomain(t, f, "")
	spare := func() string {
		out, _ := Podman(t, "ps", "--filter", "label="+domain.LabelSpare+"="+env.DataRoot, "--format", "{{.Names}}")
		return strings.TrimSpace(out)
	}
	// The CLI returns when its command ends; the coordinator then tears
	// down and leaves the spare before it removes its socket.
	down := func() {
		Eventually(t, 60*time.Second, "the coordinator to exit", func() bool {
			_, err := os.Lstat(a.ControlSocket())
			return err != nil
		})
	}
	env.MustRun("exec", "--", "true")
	down()
	if got := spare(); got != a.Sidecar() {
		t.Fatalf("spare after the sandbox ended: %q, want %s", got, a.Sidecar())
	}
	// `lazaret status` says a spare waits; the spare serves no sandbox:
	// `lazaret net status` says none runs (and shows the configured
	// policy), never the spare's deny-all as the sandbox's.
	if out := env.MustRun("status"); !strings.Contains(out, "not running") || !strings.Contains(out, "a spare network sidecar waits") {
		t.Errorf("status with a spare: %q", out)
	}
	if r := env.Run("net", "status"); r.Code != 0 || !strings.Contains(r.Stdout, "not running") || !strings.Contains(r.Stdout, "configured policy") {
		t.Errorf("net status with only a spare: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	id := sidecarID(t, a)
	env.MustRun("exec", "--", "true")
	down()
	log, _ := os.ReadFile(a.CoordinatorLog())
	if !strings.Contains(string(log), "claimed the spare network sidecar") {
		t.Errorf("the second start did not claim the spare; coordinator log:\n%s", log)
	}
	if now := sidecarID(t, a); now == "" || now == id {
		t.Errorf("no new spare after the second sandbox (before %s, now %s)", id, now)
	}

	if out := env.MustRun("stop"); !strings.Contains(out, "spare network sidecar removed") {
		t.Errorf("stop: %q", out)
	}
	if got := spare(); got != "" {
		t.Errorf("spare after stop: %q", got)
	}
	if out := env.MustRun("status"); strings.Contains(out, "spare") {
		t.Errorf("status after stop: %q", out)
	}
	for _, p := range []string{a.NetdSocket(), a.Netns()} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left after stop", p)
		}
	}

	env.MustRun("exec", "--", "true")
	down()
	if out := env.MustRun("stop", "--all"); !strings.Contains(out, "removed 1 spare network sidecar(s)") {
		t.Errorf("stop --all: %q", out)
	}
	if got := domainContainers(t, a); len(got) != 0 {
		t.Errorf("containers after stop --all: %v", got)
	}

	// A stop that comes while the last session's teardown is leaving a
	// spare (as a test harness's cleanup does) leaves none: the spare's
	// start is cancelled, or the spare removed. The control is above: the
	// same exec without a stop leaves one.
	for _, stop := range [][]string{{"stop"}, {"stop", "--all"}} {
		env.MustRun("exec", "--", "true")
		env.MustRun(stop...)
		down()
		if got := domainContainers(t, a); len(got) != 0 {
			t.Errorf("%v right after the last session: containers %v", stop, got)
		}
		for _, p := range []string{a.NetdSocket(), a.Netns()} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%v right after the last session: %s left", stop, p)
			}
		}
	}

	env.ExtraEnv = []string{"LAZARET_SPARE_SIDECAR=off"}
	env.MustRun("exec", "--", "true")
	down()
	if got := domainContainers(t, a); len(got) != 0 {
		t.Errorf("LAZARET_SPARE_SIDECAR=off left containers: %v", got)
	}

	env.ExtraEnv = []string{"LAZARET_SPARE_SIDECAR=soon"}
	r := env.Run("exec", "--", "true")
	down()
	if r.Code == 0 || !strings.Contains(r.Stderr, `LAZARET_SPARE_SIDECAR="soon"`) || strings.Count(strings.TrimSpace(r.Stderr), "\n") > 1 {
		t.Errorf("bad LAZARET_SPARE_SIDECAR: exit %d, stderr %q", r.Code, r.Stderr)
	}
	if got := domainContainers(t, a); len(got) != 0 {
		t.Errorf("a refused start left containers: %v", got)
	}
	for _, p := range []string{a.ControlSocket(), a.NetdSocket(), a.Netns()} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left after a refused start", p)
		}
	}
}

// TestSpareSidecarExpiredSwept: a spare that expires unclaimed exits and
// podman removes its container, but its namespace pin (a mount in podman's
// namespace, keeping the namespace alive) and its socket stay: nothing of
// that domain may run again. The next teardown of any other domain removes
// them; a spare that still waits keeps everything. The control is the
// first half: the pin and socket are there, the namespace pinned, before
// the other domain's teardown.
func TestSpareSidecarExpiredSwept(t *testing.T) {
	f := newNetFixture(t)
	ctx := context.Background()
	envA, _, a := netDomain(t, f, "")
	envB, _, b := netDomain(t, f, "")
	envC, _, c := netDomain(t, f, "")
	down := func(x *domain.Anchor) {
		t.Helper()
		Eventually(t, 60*time.Second, "the coordinator to exit", func() bool {
			_, err := os.Lstat(x.ControlSocket())
			return err != nil
		})
	}
	t.Cleanup(func() { envC.Run("stop"); envB.Run("stop"); envA.Run("stop") })

	// C first: its teardown must not come after A's spare expired, or it
	// would sweep A's leftovers before the control below.
	envC.MustRun("exec", "--", "true") // C's spare waits 30 minutes
	down(c)
	envA.ExtraEnv = []string{"LAZARET_SPARE_SIDECAR=5s"}
	envA.MustRun("exec", "--", "true")
	down(a)
	if sidecarID(t, a) == "" {
		t.Fatal("no spare after the first sandbox")
	}
	Eventually(t, 30*time.Second, "the expired spare's container to go", func() bool { return sidecarID(t, a) == "" })
	for _, p := range []string{a.NetdSocket(), a.Netns()} {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("control: %s gone without a sweep: %v", p, err)
		}
	}
	if pinned, err := netns.New(f.pc).Pinned(ctx, a.Netns()); err != nil || !pinned {
		t.Fatalf("control: the expired spare's namespace is not pinned (%v, %v)", pinned, err)
	}

	envB.MustRun("exec", "--", "true")
	down(b)
	for _, p := range []string{a.NetdSocket(), a.Netns()} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left after another domain's teardown", p)
		}
	}
	if log, _ := os.ReadFile(b.CoordinatorLog()); !strings.Contains(string(log), "swept ended spares of other domains") {
		t.Errorf("B's coordinator log says no sweep:\n%s", log)
	}
	// C's spare still waits, whole, and is claimed.
	if sidecarID(t, c) == "" {
		t.Fatal("the waiting spare's container was removed")
	}
	if pinned, err := netns.New(f.pc).Pinned(ctx, c.Netns()); err != nil || !pinned {
		t.Errorf("the waiting spare's namespace was unpinned (%v, %v)", pinned, err)
	}
	envC.MustRun("exec", "--", "true")
	down(c)
	if log, _ := os.ReadFile(c.CoordinatorLog()); !strings.Contains(string(log), "claimed the spare network sidecar") {
		t.Errorf("C's second start did not claim its spare:\n%s", log)
	}
}
