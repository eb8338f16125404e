package sidecar

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/netdapi"
	"github.com/lazaret-dev/lazaret/internal/podman"
)

// fakeNetd answers every control request with OK and sends the requests
// it got on reqs.
func fakeNetd(t *testing.T, path string) <-chan netdapi.Request {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	reqs := make(chan netdapi.Request, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			var req netdapi.Request
			if sc := bufio.NewScanner(c); sc.Scan() && json.Unmarshal(sc.Bytes(), &req) == nil {
				reqs <- req
			}
			json.NewEncoder(c).Encode(netdapi.Response{OK: true, Status: &netdapi.Status{}})
			c.Close()
		}
	}()
	return reqs
}

// TestRefreshHostAddrs: when the host's addresses change, netd is told
// the new list (once); unchanged addresses send nothing.
func TestRefreshHostAddrs(t *testing.T) {
	a := testAnchor(t)
	reqs := fakeNetd(t, a.NetdSocket())
	now := []netip.Addr{netip.MustParseAddr("140.82.112.50")}
	c := New(Options{Anchor: a, Podman: &podman.Client{}, HostAddrs: func() ([]netip.Addr, error) { return now, nil }})
	c.hostAddrs = slices.Clone(now)
	c.refreshHostAddrs(context.Background())
	now = append(now, netip.MustParseAddr("2a00:1450::1"))
	c.refreshHostAddrs(context.Background())
	c.refreshHostAddrs(context.Background())
	var got []netdapi.Request
	for len(reqs) > 0 {
		got = append(got, <-reqs)
	}
	if len(got) != 1 || got[0].Op != netdapi.OpHostAddrs || !slices.Equal(got[0].Addrs, now) {
		t.Errorf("requests %+v; want one host_addrs with %v", got, now)
	}
}
