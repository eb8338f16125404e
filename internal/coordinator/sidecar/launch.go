package sidecar

// Starting the sidecar: its image, its control socket, `podman run` into
// the pinned network namespace, the uplink attached once the ruleset is in.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/netns"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/netdimage"
	"github.com/lazaret-dev/lazaret/internal/execx"
	"github.com/lazaret-dev/lazaret/internal/unixsock"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// startInBackground is Prepare's background half: the spare when one can
// be claimed, else a new namespace and sidecar.
func (c *Component) startInBackground(ctx context.Context) error {
	netdBin := c.resolveImage()
	if c.o.SpareExpiry > 0 {
		err := c.claimSpare(ctx)
		if err == nil {
			c.started = true
			c.pin(nil)
			return c.attach(ctx, c.o.Anchor.Sidecar())
		}
		// No spare is the common case (a first start, after a stop or
		// the spare's expiry): a socket that is not there or refuses.
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ECONNREFUSED) {
			c.o.Log.Info("not claiming the spare sidecar; starting one", "err", err)
		}
	}
	lf, err := listenControl(c.o.Anchor.NetdSocket())
	if err != nil {
		return err
	}
	defer lf.Close()
	// A spare left in the namespace's pin (expired, or refused above)
	// is replaced with it: its netd keeps only the old namespace, which
	// nothing joins, and podman run --replace (RunArgs) removes its
	// container.
	if err := c.ns().Create(ctx, c.o.Anchor.Netns()); err != nil {
		return fmt.Errorf("%w: %w", ErrSidecarFailed, err)
	}
	c.pin(nil)
	c.started = true
	sspec, err := c.spec(false)
	if err != nil {
		return err
	}
	inv, err := c.o.Podman.RunArgs(sspec)
	if err != nil {
		return err
	}
	if err := c.launch(ctx, inv, lf, netdBin); err != nil {
		return err
	}
	return c.attach(ctx, sspec.Name)
}

// resolveImage picks the sidecar's image: with no image given, the
// content tag of the installed lazaret-netd (no podman call is needed to
// know it holds that binary), whose path it returns for building the
// image when it is missing. Without one installed, netdimage.ImageRef()
// is used as it is.
func (c *Component) resolveImage() (netdBin string) {
	if c.autoImage {
		if ref, bin, err := netdimage.InstalledImageRef(); err == nil {
			c.o.Image, netdBin = ref, bin
		}
	}
	return netdBin
}

// launch runs the sidecar (inv), waits for its ruleset and closes lf,
// the control socket's listener it hands over. netdBin is set when the
// image is the content tag of that binary: a missing image (a first
// start, a new build) is built from it and the sidecar started again. An
// explicit image (tests) is used as it is.
func (c *Component) launch(ctx context.Context, inv *podman.Invocation, lf *os.File, netdBin string) error {
	runErr := c.run(ctx, inv, lf)
	if errors.Is(runErr, errImageMissing) && netdBin != "" {
		c.o.Log.Info("building the sidecar image", "image", c.o.Image)
		if err := netdimage.BuildImage(ctx, c.o.Podman, netdBin, c.o.Image); err != nil {
			return err
		}
		netdimage.PruneImages(ctx, c.o.Podman, c.o.Image)
		runErr = c.run(ctx, inv, lf)
	} else if errors.Is(runErr, errImageMissing) {
		runErr = fmt.Errorf("%w (no lazaret-netd installed to build it from: `make install`, then `lazaret image build`)", runErr)
	}
	// From now on a connection is refused as soon as netd is gone.
	lf.Close()
	if runErr != nil {
		return runErr
	}
	return c.waitReady(ctx)
}

// attach gives the ready sidecar the sandbox's secrets and attaches the
// uplink: only now can anything in the namespace reach anything.
func (c *Component) attach(ctx context.Context, name string) error {
	if err := c.sendSecrets(ctx); err != nil {
		return err
	}
	u, err := c.ns().StartUplink(ctx, c.o.Anchor.Netns(), netns.UplinkOptions{IPv6: true})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSidecarFailed, err)
	}
	c.mu.Lock()
	c.uplink = u
	c.mu.Unlock()
	c.o.Log.Info("network sidecar ready", "name", name)
	return nil
}

// run starts the sidecar container with the control socket as its fd 3.
func (c *Component) run(ctx context.Context, inv *podman.Invocation, control *os.File) error {
	cmd, err := c.o.Podman.Cmd(ctx, inv, control) // control becomes fd 3 in the sidecar (--preserve-fds 1)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSidecarFailed, err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := lastLine(stderr.String(), err)
		if strings.Contains(msg, "image not known") {
			return fmt.Errorf("%w: %w: %s", ErrSidecarFailed, errImageMissing, msg)
		}
		return fmt.Errorf("%w: podman run: %s", ErrSidecarFailed, msg)
	}
	return nil
}

// errImageMissing: podman run found no such image (--pull=never).
var errImageMissing = errors.New("sidecar image missing")

// listenControl creates the control socket (0600) in the private runtime
// dir, replacing a stale one, and returns its listening descriptor, which
// becomes netd's fd 3. Never through the umask: it is process-wide and
// the coordinator creates directories in parallel (internal/unixsock).
func listenControl(path string) (*os.File, error) {
	ln, err := unixsock.ListenReplacing(path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	lf, err := ln.File()
	ln.Close() // the duplicate in lf keeps the socket listening
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return lf, nil
}

// waitReady polls netd's status every 10 ms until it reports its ruleset
// applied. Whether the container still runs is asked of podman (a ~50 ms
// call) only every half second or when the socket refuses connections
// (nobody holds it open any more), so a failing sidecar is reported with
// its last log line instead of after the timeout.
func (c *Component) waitReady(ctx context.Context) error {
	cl := &netdapi.Client{Socket: c.o.Anchor.NetdSocket(), Timeout: 2 * time.Second}
	start := time.Now()
	deadline := start.Add(c.o.ReadyTimeout)
	var lastCheck time.Time
	for {
		st, err := cl.Status(ctx)
		if err == nil && st.Applied {
			c.o.Log.Debug("netd ruleset applied", "waited", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if errors.Is(err, syscall.ECONNREFUSED) || time.Since(lastCheck) > 500*time.Millisecond {
			lastCheck = time.Now()
			info, ierr := c.o.Podman.InspectContainer(ctx, c.o.Anchor.Sidecar())
			if ierr == nil && info.State.Status != "running" && info.State.Status != "created" {
				s := info.State.Status
				logs, _ := c.o.Podman.Logs(ctx, c.o.Anchor.Sidecar())
				return fmt.Errorf("%w: sidecar %s: %s", ErrSidecarFailed, s, lastLine(string(logs), nil))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: ruleset not reported installed within %v (last: %v)", ErrSidecarFailed, c.o.ReadyTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// lastLine is the last line of s, or err's message when s has none.
func lastLine(s string, err error) string {
	s = execx.LastLine(s)
	if s == "" && err != nil {
		return err.Error()
	}
	return s
}
