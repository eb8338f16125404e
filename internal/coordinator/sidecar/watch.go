package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/netns"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/procwatch"
)

// watchInterval is how often Watch checks netd's process (one read of
// /proc) and hostRefresh how often it compares the host's addresses.
const (
	watchInterval = time.Second
	hostRefresh   = 30 * time.Second
)

// ErrSidecarDied is returned by Watch when netd or the uplink ended while
// the sandbox ran.
var ErrSidecarDied = errors.New("network sidecar died")

// HostAddrs returns the host's own addresses, every interface's, v4 and
// v6: an answer of netd's resolver naming one of them opens nothing
// (through slirp4netns, a host address reaches the host's services).
func HostAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("host addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, pfx.Addr().Unmap().WithZone(""))
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out), nil
}

// Watch implements the coordinator's Watcher. It returns nil when ctx
// ends, or ErrSidecarDied once netd's process or slirp4netns has ended —
// after cutting the namespace off: the uplink is stopped and every
// interface but loopback deleted, so nothing in the sandbox reaches
// anything whatever the ruleset still holds (temporary allowances that
// netd would have expired, for instance). Meanwhile it keeps netd's view
// of the host's addresses current.
func (c *Component) Watch(ctx context.Context) error {
	c.mu.Lock()
	u := c.uplink
	c.mu.Unlock()
	if u == nil {
		return nil // not started
	}
	p, err := c.netdProcess(ctx)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return c.died(u, fmt.Errorf("lazaret-netd is not running: %w", err))
	}
	// The kernel says when the host's addresses change; the poll stays
	// as a backstop (and is all there is without the subscription).
	var changed <-chan struct{}
	if w, err := watchAddrChanges(); err != nil {
		c.o.Log.Warn("no notification of the host's address changes; comparing them every 30 s", "err", err)
	} else {
		defer w.Close()
		changed = w.C
	}
	// A change between Prepare's look and the subscription came before
	// any notification could: compare once now.
	c.refreshHostAddrs(ctx)
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	refresh := time.Now()
	for {
		now := false
		select {
		case <-ctx.Done():
			return nil
		case <-c.closing:
			return nil
		case <-u.Done():
			if c.isClosing() {
				return nil
			}
			return c.died(u, fmt.Errorf("the uplink (slirp4netns) exited (its last output: %s)", u.LastLine()))
		case _, ok := <-changed:
			if !ok {
				changed = nil // the subscription failed: the poll remains
			}
			now = true
		case <-t.C:
		}
		if !p.Alive() && !c.isClosing() {
			return c.died(u, c.exitOf())
		}
		if now || time.Since(refresh) >= hostRefresh {
			refresh = time.Now()
			c.refreshHostAddrs(ctx)
		}
	}
}

// netdProcess finds netd's process (the sidecar's only one). podman may
// fail for a moment on a busy machine (its lock): a failure other than a
// stopped or missing container is tried again twice.
func (c *Component) netdProcess(ctx context.Context) (procwatch.Process, error) {
	var err error
	for try := 0; try < 3; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return procwatch.Process{}, ctx.Err()
			case <-time.After(watchInterval):
			}
		}
		var info *podman.ContainerInfo
		info, err = c.o.Podman.InspectContainer(ctx, c.o.Anchor.Sidecar())
		switch {
		case err == nil && !info.State.Running:
			return procwatch.Process{}, fmt.Errorf("container %s, exit code %d", info.State.Status, info.State.ExitCode)
		case err == nil:
			return procwatch.Find(info.State.Pid)
		case errors.Is(err, podman.ErrNoSuchContainer):
			return procwatch.Process{}, err
		}
	}
	return procwatch.Process{}, err
}

// exitOf describes how the sidecar container ended.
func (c *Component) exitOf() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.o.Podman.InspectContainer(ctx, c.o.Anchor.Sidecar())
	if err != nil || info.State.Running {
		return errors.New("lazaret-netd exited")
	}
	return fmt.Errorf("lazaret-netd exited (container %s, exit code %d)", info.State.Status, info.State.ExitCode)
}

// died cuts the namespace off and returns why.
func (c *Component) died(u *netns.Uplink, why error) error {
	c.o.Log.Error("network sidecar died; cutting the sandbox's network off", "err", why)
	u.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := c.ns().Cut(ctx, c.o.Anchor.Netns()); err != nil {
		why = fmt.Errorf("%w (cutting its interfaces failed: %v %s)", why, err, strings.TrimSpace(out))
	}
	return fmt.Errorf("%w: %w", ErrSidecarDied, why)
}

func (c *Component) isClosing() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// refreshHostAddrs tells netd the host's addresses when they changed.
func (c *Component) refreshHostAddrs(ctx context.Context) {
	addrs, err := c.o.HostAddrs()
	if err != nil || slices.Equal(addrs, c.hostAddrs) {
		return
	}
	if err := Client(c.o.Anchor).SetHostAddrs(ctx, addrs, "host addresses changed"); err != nil {
		c.o.Log.Warn("could not refresh netd's host addresses", "err", err)
		return
	}
	c.hostAddrs = addrs
}
