package sidecar

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi/netdtest"
)

// TestRefreshHostAddrs: when the host's addresses change, netd is told
// the new list (once); unchanged addresses send nothing.
func TestRefreshHostAddrs(t *testing.T) {
	a := testAnchor(t)
	f, _ := netdtest.Serve(t, a.NetdSocket())
	now := []netip.Addr{netip.MustParseAddr("140.82.112.50")}
	c := New(Options{Anchor: a, Podman: &podman.Client{}, HostAddrs: func() ([]netip.Addr, error) { return now, nil }})
	c.hostAddrs = slices.Clone(now)
	c.refreshHostAddrs(context.Background())
	now = append(now, netip.MustParseAddr("2a00:1450::1"))
	c.refreshHostAddrs(context.Background())
	c.refreshHostAddrs(context.Background())
	got := f.Requests()
	if len(got) != 1 || got[0].Op != netdapi.OpHostAddrs || !slices.Equal(got[0].Addrs, now) {
		t.Errorf("requests %+v; want one host_addrs with %v", got, now)
	}
}
