package sidecar

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/netdimage"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

func testAnchor(t *testing.T) *domain.Anchor {
	a, err := domain.New("default", t.TempDir(), t.TempDir(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestSpec pins the sidecar's hardening: runc, only NET_ADMIN and
// NET_BIND_SERVICE, no new privileges, read-only root, the domain label,
// the control socket as fd 3, and the resolver the agent inherits.
func TestSpec(t *testing.T) {
	a := testAnchor(t)
	prof := &config.Profile{Name: "default",
		AllowEgress:  []netip.Prefix{netip.MustParsePrefix("140.82.112.0/20")},
		AllowDomains: []string{"registry.npmjs.org"}}
	c := NewComponent(prof, a, &podman.Client{}, nil)
	spec, err := c.Spec()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := (&podman.Client{Runtime: "/should/not/be/used"}).RunArgs(spec)
	if err != nil {
		t.Fatal(err)
	}
	args := inv.Args
	line := strings.Join(args, " ")
	for _, want := range []string{
		"--name " + a.Sidecar(),
		"--runtime runc",
		"--label lazaret.domain=" + a.Hash,
		"--network ns:" + a.Netns(),
		"--cap-drop ALL --cap-add NET_ADMIN --cap-add NET_BIND_SERVICE",
		"--security-opt no-new-privileges",
		"--read-only",
		"--preserve-fds 1",
		netdimage.ImageRef() + " --control-fd 3 --policy ",
		"--upstream " + SlirpResolver,
		// Without a working directory podman 4 reads the image's
		// /etc/passwd twice, each a re-exec of itself (~130 ms).
		"--workdir /",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("sidecar argv lacks %q:\n%s", want, line)
		}
	}
	if slices.Contains(args, "/should/not/be/used") || strings.Contains(line, "runsc") {
		t.Errorf("sidecar must run under runc, not the sandbox runtime: %s", line)
	}
	i := slices.Index(args, "--policy")
	var p netpolicy.Policy
	if err := json.Unmarshal([]byte(args[i+1]), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.AllowEgress) != 1 || p.AllowEgress[0].Prefix.String() != "140.82.112.0/20" || len(p.AllowDomains) != 1 {
		t.Errorf("policy passed to netd: %+v", p)
	}
}

// TestPrepareRefusesBadPolicy: a policy netd would refuse fails before
// anything is started and leaves the spec without a network.
func TestPrepareRefusesBadPolicy(t *testing.T) {
	prof := &config.Profile{Name: "default", AllowDomains: []string{"bad..name"}}
	c := NewComponent(prof, testAnchor(t), &podman.Client{Bin: "/nonexistent/podman"}, nil)
	spec := &podman.ContainerSpec{Network: "none"}
	if err := c.Prepare(context.Background(), spec); err == nil || spec.Network != "none" {
		t.Errorf("Prepare = %v, network %q", err, spec.Network)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Errorf("Close after a failed Prepare: %v", err)
	}
}

// TestHostAddrsReachNetd: the sidecar collects every address of the
// host's interfaces (the coordinator runs on the host) and passes each to
// netd as --host-addr, so no DNS answer can open one.
func TestHostAddrsReachNetd(t *testing.T) {
	addrs, err := HostAddrs()
	if err != nil {
		t.Fatal(err)
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ia := range ifaddrs {
		p, err := netip.ParsePrefix(ia.String())
		if err == nil && !slices.Contains(addrs, p.Addr().Unmap()) {
			t.Errorf("host address %s missing from %v", p.Addr(), addrs)
		}
	}
	c := New(Options{Anchor: testAnchor(t), Podman: &podman.Client{}})
	c.hostAddrs = []netip.Addr{netip.MustParseAddr("140.82.112.50"), netip.MustParseAddr("2a00:1450::1")}
	spec, err := c.Spec()
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(spec.Command, " ")
	if !strings.Contains(line, "--host-addr 140.82.112.50 --host-addr 2a00:1450::1") {
		t.Errorf("netd command lacks the host addresses: %s", line)
	}
}

// TestSpareSpec: a spare carries nothing of a sandbox (no policy, no host
// addresses: its claim brings them), its key and expiry, the spare label
// scoped to the data_root, and podman removes it when it exits unclaimed.
// Every sidecar start replaces a spare left in the domain.
func TestSpareSpec(t *testing.T) {
	a := testAnchor(t)
	pol, err := netpolicy.FromConfig([]netip.Prefix{netip.MustParsePrefix("140.82.112.0/20")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := New(Options{Anchor: a, Policy: pol, Image: "img", SpareExpiry: 30 * time.Minute})
	c.hostAddrs = []netip.Addr{netip.MustParseAddr("192.0.2.2")}
	args := func(spare bool) string {
		spec, err := c.spec(spare)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := (&podman.Client{}).RunArgs(spec)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(inv.Args, " ")
	}
	spare, normal := args(true), args(false)
	for _, want := range []string{"--policy {} ", "--spare-expiry 30m0s", "--spare-key " + c.spareKey(),
		"--rm", "--label " + domain.LabelSpare + "=" + a.DataRoot, "--name " + a.Sidecar()} {
		if !strings.Contains(spare, want) {
			t.Errorf("spare args lack %q:\n%s", want, spare)
		}
	}
	for _, bad := range []string{"140.82.112.0", "--host-addr"} {
		if strings.Contains(spare, bad) {
			t.Errorf("spare args carry %q:\n%s", bad, spare)
		}
	}
	if !strings.Contains(normal, "--host-addr 192.0.2.2") {
		t.Errorf("sidecar args:\n%s", normal)
	}
	for _, bad := range []string{"--spare", "--rm", domain.LabelSpare} {
		if strings.Contains(normal, bad) {
			t.Errorf("sidecar args carry %q:\n%s", bad, normal)
		}
	}
	// The key changes with what the spare is started with, not with the
	// policy (the claim brings that).
	key := c.spareKey()
	for _, o := range []Options{
		{Anchor: a, Image: "img2"},
		{Anchor: a, Image: "img", Upstreams: []string{"192.0.2.53"}},
		{Anchor: a, Image: "img", NetdArgs: []string{"--min-ttl", "1s"}},
	} {
		if New(o).spareKey() == key {
			t.Errorf("%+v: same spare key", o)
		}
	}
	if New(Options{Anchor: a, Image: "img"}).spareKey() != key {
		t.Error("the policy changed the spare key")
	}
}
