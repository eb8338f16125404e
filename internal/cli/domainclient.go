package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/lazaret-dev/lazaret/internal/adapter/netns"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/cli/connect"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/domainlock"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// domainClient is the CLI's one way to a domain's coordinator: whether one
// is alive, connecting to it (starting it when none runs), stopping it, and
// running a maintenance action under the domain's hold-to-bind lock while
// none runs. Verbs do not dial, lock or sweep by themselves.
type domainClient struct {
	a   *domain.Anchor
	log *slog.Logger
	pm  *podman.Client
}

func (g *globalOptions) domainClient(a *domain.Anchor) *domainClient {
	return &domainClient{a: a, log: g.log, pm: g.podmanClient()}
}

// Errors of maintain: the lock is held (a leader is starting a
// coordinator), or a coordinator answers.
var (
	errDomainLocked    = errors.New("a sandbox is starting")
	errCoordinatorLive = errors.New("its coordinator answers: running, starting or stopping")
)

// dial connects to the running coordinator without attaching a session
// and without starting one; connect.ErrNotRunning when none answers.
func (d *domainClient) dial(ctx context.Context) (*ctl.Client, error) {
	return dialSocket(ctx, d.a.ControlSocket(), d.log)
}

// dialSocket is dial for a coordinator found by its socket (ps, stop --all).
func dialSocket(ctx context.Context, socket string, log *slog.Logger) (*ctl.Client, error) {
	return connect.Dial(ctx, socket, log)
}

// alive reports whether a coordinator answers on the domain's control
// socket: running, still starting, shutting down, or of another version.
// A coordinator that accepts but does not answer within controlTimeout
// counts as alive too.
func (d *domainClient) alive(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	c, err := d.dial(ctx)
	if err == nil {
		c.Close()
		return true
	}
	return !errors.Is(err, connect.ErrNotRunning)
}

// connect attaches client to the domain's coordinator, starting one with
// spawn when none runs (connect.Connect: hold-to-bind).
func (d *domainClient) connect(ctx context.Context, client *ctl.Client, hello ctl.Hello, spawn connect.Spawn) error {
	return connect.Connect(ctx, d.a, client, hello, spawn, d.log)
}

// maintain runs action under the domain's lock while no coordinator is
// alive: the lock keeps a sandbox from starting meanwhile (a leader holds
// it until its coordinator answers). With wait it waits for the lock,
// else a held lock is errDomainLocked. A live coordinator is
// errCoordinatorLive.
func (d *domainClient) maintain(ctx context.Context, wait bool, action func() error) error {
	lock, err := domainlock.Open(d.a.LockFile())
	if err != nil {
		return err
	}
	defer lock.Close()
	if wait {
		err = lock.Lock(ctx)
	} else {
		var ok bool
		if ok, err = lock.TryLock(); err == nil && !ok {
			err = errDomainLocked
		}
	}
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if d.alive(ctx) {
		return errCoordinatorLive
	}
	return action()
}

// stop asks the domain's coordinator to stop and waits until it has torn
// down; connect.ErrNotRunning when none answers.
func (d *domainClient) stop(ctx context.Context) error {
	return stopCoordinator(ctx, d.a.ControlSocket(), d.log)
}

// stopCoordinator asks the coordinator at socket to stop and waits until
// it has torn down and closed the connection.
func stopCoordinator(ctx context.Context, socket string, log *slog.Logger) error {
	c, err := dialSocket(ctx, socket, log)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Stop(ctx, ctl.StopRequest{}); err != nil && !errors.Is(err, ctl.ErrClosed) {
		return fmt.Errorf("stop: %w", err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// removeLeftovers removes the containers of the domain when no
// coordinator owns them (the same sweep a recovering coordinator makes):
// a dead coordinator's, or the spare network sidecar the last sandbox
// left for the next start (spares counts those).
func (d *domainClient) removeLeftovers(ctx context.Context) (leftovers, spares int, err error) {
	if d.alive(ctx) {
		return 0, 0, nil
	}
	list, err := d.pm.RemoveLabelled(ctx, domain.LabelKey, d.a.Hash)
	if err != nil {
		return 0, 0, err
	}
	for _, c := range list {
		if isSpare(c.Labels, len(list)) {
			spares++
		} else {
			leftovers++
		}
	}
	return leftovers, spares, nil
}

// isSpare tells a spare network sidecar from a dead sandbox's leftovers:
// it carries domain.LabelSpare and is its domain's only container (a
// claimed spare is a sandbox's sidecar, and keeps the label).
func isSpare(labels map[string]string, ofDomain int) bool {
	return labels[domain.LabelSpare] != "" && ofDomain == 1
}

// removeDeadRuntime removes the runtime files a dead coordinator of the
// domain left (its sockets and its components', the TLS directory, the
// network namespace pin), or a removed spare sidecar's (its control
// socket and namespace pin), under the domain's lock. A live coordinator
// or a leader at work owns them: then nothing is removed.
func (d *domainClient) removeDeadRuntime(ctx context.Context) error {
	left := false
	for _, p := range []string{d.a.ControlSocket(), d.a.NetdSocket(), d.a.Netns()} {
		if _, err := os.Lstat(p); err == nil {
			left = true
		}
	}
	if !left {
		return nil
	}
	err := d.maintain(ctx, false, func() error { return sweepRuntime(ctx, d.a, d.pm) })
	if errors.Is(err, errDomainLocked) || errors.Is(err, errCoordinatorLive) {
		return nil
	}
	return err
}

func sweepRuntime(ctx context.Context, a *domain.Anchor, pm *podman.Client) error {
	var errs []error
	for _, sock := range a.RuntimeSockets() {
		if fi, err := os.Lstat(sock); err == nil && fi.Mode().Type() == os.ModeSocket {
			if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := os.RemoveAll(a.TLSDir()); err != nil {
		errs = append(errs, err)
	}
	for _, f := range []string{a.CABundleSnapshot(), a.InjectBundle()} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	// The network namespace pin (its slirp4netns exited with the
	// coordinator; the pin would keep an empty namespace alive).
	if _, err := os.Lstat(a.Netns()); err == nil {
		if err := netns.New(pm).Remove(ctx, a.Netns()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
