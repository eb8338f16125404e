package sidecar

// The spare this component leaves at a normal teardown and claims at the
// next start: a fresh netd, deny-all, no uplink (docs/LIFECYCLE.md).

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/netns"
	"github.com/lazaret-dev/lazaret/internal/version"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// claimSpare makes the spare sidecar waiting in the domain's namespace
// pin this sandbox's, with the profile's policy and the host's addresses,
// both installed before it answers. A spare started for another image,
// upstreams or flags refuses (spareKey).
func (c *Component) claimSpare(ctx context.Context) error {
	if _, err := os.Lstat(c.o.Anchor.NetdSocket()); err != nil {
		return err // no spare: the common first start, without a process
	}
	// The agent joins the namespace at the pin: a spare whose pin is
	// gone is not claimed (it is replaced below).
	if pinned, err := c.ns().Pinned(ctx, c.o.Anchor.Netns()); err != nil || !pinned {
		return cmp.Or(err, errSpareUnpinned)
	}
	cl := &netdapi.Client{Socket: c.o.Anchor.NetdSocket(), Timeout: 2 * time.Second}
	if _, err := cl.Claim(ctx, c.spareKey(), c.o.Policy, c.hostAddrs); err != nil {
		return err
	}
	c.o.Log.Info("claimed the spare network sidecar", "name", c.o.Anchor.Sidecar())
	return nil
}

// spareKey digests what a spare must share with the sidecar this
// component would start: image, runtime, upstreams, netd's flags and
// lazaret's version. The policy and the host's addresses are not in it:
// the claim brings them.
func (c *Component) spareKey() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%q\x00%q\n", version.Version, c.o.Image, c.o.Runtime, c.o.Upstreams, c.o.NetdArgs)
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// StartSpare leaves a spare sidecar for the domain's next start, which
// claims it instead of starting one (claimSpare): a fresh netd, which has
// served no sandbox, in a new namespace pinned where the sandbox's was,
// with a deny-all ruleset, no uplink and nothing of the sandbox (the
// claim brings the policy and the host's addresses; secrets come after
// it). It exits unclaimed after Options.SpareExpiry. The coordinator
// calls it at teardown, after Close, while it still holds the domain.
func (c *Component) StartSpare(ctx context.Context) (err error) {
	if c.o.SpareExpiry <= 0 || c.err != nil {
		return nil
	}
	defer func() {
		if err == nil {
			return
		}
		// Nothing half-made stays, nor what Close handed over: the next
		// start finds no spare.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		defer cancel()
		_ = c.RemoveSpare(cctx)
	}()
	a := c.o.Anchor
	netdBin := c.resolveImage()
	sspec, err := c.spec(true)
	if err != nil {
		return err
	}
	inv, err := c.o.Podman.RunArgs(sspec)
	if err != nil {
		return err
	}
	lf, err := listenControl(a.NetdSocket())
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := netns.Reserve(a.Netns()); err != nil {
		return fmt.Errorf("%w: %w", ErrSidecarFailed, err)
	}
	if err := c.ns().Create(ctx, a.Netns()); err != nil {
		return fmt.Errorf("%w: %w", ErrSidecarFailed, err)
	}
	if err := c.launch(ctx, inv, lf, netdBin); err != nil {
		return err
	}
	c.o.Log.Info("spare network sidecar ready", "name", sspec.Name, "expires_in", c.o.SpareExpiry)
	return nil
}

// HandOverToSpare makes the next Close stop the uplink only and leave the
// sidecar container, its control socket and its namespace pin to
// StartSpare, which replaces each (a new pin over the old one, a new
// socket, podman run --replace) in fewer steps than removing them first:
// one podman process less at every teardown that leaves a spare. Should
// no spare follow, RemoveSpare removes them (the names are the same).
// Until then the old netd, which has no uplink any more, runs in a
// namespace that no container joins.
func (c *Component) HandOverToSpare() {
	if c.o.SpareExpiry > 0 && c.err == nil {
		c.handOver = true
	}
}

// RemoveSpare removes the domain's spare sidecar, its control socket
// and its namespace pin (after StartSpare, when a stop came meanwhile),
// or, when no spare followed a handover, the sandbox's own.
func (c *Component) RemoveSpare(ctx context.Context) error {
	a := c.o.Anchor
	var errs []error
	if err := c.o.Podman.RemoveContainer(ctx, a.Sidecar(), 0); err != nil {
		errs = append(errs, fmt.Errorf("remove spare sidecar: %w", err))
	}
	if err := os.Remove(a.NetdSocket()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := c.ns().Remove(ctx, a.Netns()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// errSpareUnpinned: the spare's socket is there but its namespace pin is not.
var errSpareUnpinned = errors.New("the spare's network namespace is no longer pinned")
