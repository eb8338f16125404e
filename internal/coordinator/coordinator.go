// Package coordinator is the Session Coordinator process (`lazaret
// __coordinator`, spawned detached by the CLI through internal/cli/connect):
// sandbox start, the control socket, reference counting, teardown, crash
// recovery, and the components under internal/coordinator/....
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sandbox"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/events"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/version"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/starterr"
)

// Defaults of Options.
const (
	// DefaultIdleGrace is how long a coordinator waits for its first
	// session (the leader that spawned it may have died).
	DefaultIdleGrace = 30 * time.Second
	// DefaultStopTimeout is how long the container's processes get after
	// SIGTERM at teardown. No session is attached by then (or the user
	// asked for the stop), and the workspace is a bind mount with nothing
	// to flush, so it is short.
	DefaultStopTimeout = 1 * time.Second
	// teardownTimeout bounds each podman call and component Close during
	// teardown.
	teardownTimeout = 30 * time.Second
	// startErrGrace is how long a coordinator whose start failed waits for
	// a client to collect the error.
	startErrGrace = 3 * time.Second
)

// Reasons pushed to sessions with ctl.Shutdown.
const (
	ReasonStopped    = "the sandbox was stopped by `lazaret stop`"
	ReasonAborted    = "aborted from the escalation prompt"
	ReasonTerminated = "the session coordinator was terminated"
	ReasonIdle       = "no session attached"
	ReasonLastDetach = "the last session ended"
)

// Options configure a coordinator.
type Options struct {
	Config  *config.Config
	Profile *config.Profile
	Anchor  *domain.Anchor
	// Volumes are the profile's custom volumes, resolved for this domain.
	Volumes []config.ResolvedVolume
	// Recover removes the domain's labelled leftovers before starting
	// (set when the previous coordinator left a dead socket).
	Recover     bool
	Podman      *podman.Client
	Log         *slog.Logger
	IdleGrace   time.Duration
	StopTimeout time.Duration
	// Secrets are the profile's secrets, read before anything started.
	Secrets *sidecar.Secrets
}

type coordinator struct {
	o       Options
	log     *slog.Logger
	pm      *podman.Client
	srv     *ctlserver.Server
	ln      *net.UnixListener
	started time.Time

	// Set by start before ready is closed; read-only afterwards.
	ready       chan struct{}
	startErr    error
	spec        *podman.ContainerSpec
	containerID string
	comps       []sandbox.Component
	prepared    int // components whose Prepare started (Close is owed to them)
	spareExpiry time.Duration
	spareErr    error // LAZARET_SPARE_SIDECAR was not understood
	runAttempt  bool

	mu           sync.Mutex
	refs         int
	shuttingDown bool
	reason       string
	wake         chan struct{} // something changed: refs reached zero, stop asked
	errServed    chan struct{} // a hello got the start error (closed once)
	errOnce      sync.Once
	torndown     chan struct{}
	// stopNotify stops the notifiers, once their last notices are out
	// (nil without any).
	stopNotify func()
	// stopWG counts stop requests waiting for their reply; stopClosed
	// (under mu) ends new registrations before teardown waits on it.
	stopWG     sync.WaitGroup
	stopClosed bool
	// stopAsked (under mu): a stop request came, so no spare is left;
	// cancelSpare stops one being started (spare.go).
	stopAsked   bool
	cancelSpare context.CancelFunc
	// handedOver: the Closes left what a spare replaces (teardown's
	// goroutine only).
	handedOver bool

	state state // the domain's state store (state.go)

	// events is the sandbox's event stream, approvals its pending
	// requests (eventstream.go); kept (under mu) the state each kept
	// session's CLI reported.
	events    *events.Hub
	approvals *approvals.Hub
	kept      map[string]ctl.SessionState
}

// Run is the Session Coordinator process: it opens the control socket,
// starts the sandbox, serves sessions until the last one leaves (or a stop
// request, SIGINT or SIGTERM cancels ctx) and tears everything down. It
// returns after the control socket is gone.
func Run(ctx context.Context, o Options) error {
	// No core dumps and no ptrace by other processes of the user: the
	// coordinator holds the Trust Anchor's keys.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Podman == nil {
		o.Podman = &podman.Client{Log: o.Log}
	}
	if o.IdleGrace == 0 {
		o.IdleGrace = DefaultIdleGrace
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	a := o.Anchor
	// Directories an older lazaret left unusable (umask race) would fail
	// this start with "permission denied": give them their modes back.
	fixed, err := a.RepairModes()
	if len(fixed) > 0 {
		o.Log.Warn("restored the modes of the domain's directories", "dirs", fixed)
	}
	if err != nil {
		return fmt.Errorf("repairing the domain's directory modes: %w", err)
	}
	c := &coordinator{
		o: o, log: o.Log, pm: o.Podman, started: time.Now(),
		ready: make(chan struct{}), wake: make(chan struct{}, 1), torndown: make(chan struct{}),
		errServed: make(chan struct{}),
	}
	ln, err := listen(a.ControlSocket())
	if err != nil {
		return err
	}
	c.ln = ln
	c.srv = ctlserver.NewServer(os.Getuid(), o.Log)
	c.srv.Hello = c.hello
	c.srv.Attached = c.attached
	c.srv.Detached = c.detached
	c.srv.Handle(ctl.TypeStatus, c.handleStatus)
	c.srv.Handle(ctl.TypeStop, c.handleStop)
	c.srv.Handle(ctl.TypeExecSpec, c.handleExecSpec)
	c.srv.Handle(ctl.TypeGitSync, c.handleGitSync)
	c.srv.Handle(ctl.TypeForkState, c.handleForkState)
	for typ, h := range ctlserver.AuditHandlers(auditStore{c}) {
		c.srv.Handle(typ, h)
	}
	c.setUpEvents()
	c.spareExpiry, c.spareErr = spareExpiry()
	c.comps = components(&Deps{Config: o.Config, Profile: o.Profile, Anchor: a, Podman: o.Podman, Server: c.srv, Log: o.Log, Audit: c.appendAudit, Secrets: o.Secrets, SpareExpiry: c.spareExpiry,
		Events: c.events, Approvals: c.approvals})
	go func() {
		if err := c.srv.Serve(ln); err != nil {
			c.log.Error("control socket", "err", err)
		}
	}()
	c.log.Info("coordinator started", "pid", os.Getpid(), "domain", a.Hash, "profile", a.Profile, "workspace", a.Workspace, "version", version.Version)

	go func() {
		c.startErr = c.start(ctx)
		if c.startErr != nil {
			c.log.Error("sandbox start failed", "err", c.startErr)
		} else {
			c.log.Info("sandbox running", "container", c.spec.Name, "id", c.containerID, "after", time.Since(c.started).Round(time.Millisecond))
		}
		c.auditStarted(c.startErr)
		close(c.ready)
	}()

	reason := c.wait(ctx)
	c.log.Info("tearing down", "reason", reason)
	c.teardown(reason)
	c.log.Info("coordinator exited")
	return c.startErr
}

// wait returns the reason to tear down: start failure, a stop request,
// the last session leaving, no session in the idle grace, or ctx ending.
func (c *coordinator) wait(ctx context.Context) string {
	select {
	case <-c.ready:
	case <-ctx.Done():
		c.shutdown(ReasonTerminated, false)
		<-c.ready // start sees ctx too and returns promptly
		return ReasonTerminated
	}
	if c.startErr != nil {
		c.shutdown("start failed", false)
		// The leader polls for the socket: give it a moment to connect
		// and receive the error, which carries the fix for the user.
		select {
		case <-c.errServed:
		case <-ctx.Done():
		case <-time.After(startErrGrace):
		}
		return "start failed: " + c.startErr.Error()
	}
	go c.watchContainer(ctx)
	c.watchComponents(ctx)
	idle := time.NewTimer(c.o.IdleGrace)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			c.shutdown(ReasonTerminated, false)
			return ReasonTerminated
		case <-idle.C:
			if c.shutdown(ReasonIdle, true) {
				return ReasonIdle
			}
		case <-c.wake:
			c.mu.Lock()
			down, reason := c.shuttingDown, c.reason
			c.mu.Unlock()
			if down {
				return reason
			}
			if c.shutdown(ReasonLastDetach, true) {
				return ReasonLastDetach
			}
		}
	}
}

// shutdown marks the coordinator as shutting down, so that no new session
// attaches. With ifIdle it does so only while no session is attached
// (atomically with the reference count). It reports whether it did.
func (c *coordinator) shutdown(reason string, ifIdle bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shuttingDown || (ifIdle && c.refs > 0) {
		return false
	}
	c.shuttingDown, c.reason = true, reason
	return true
}

func (c *coordinator) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *coordinator) hello(ctx context.Context, h *ctl.Hello) (*ctl.HelloReply, error) {
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, ctl.ErrClosed
	}
	if c.startErr != nil {
		c.errOnce.Do(func() { close(c.errServed) })
		return nil, starterr.ToWire(c.startErr)
	}
	// A coordinator that is shutting down still answers status and stop;
	// a session is refused then by attached, under the reference lock.
	a := c.o.Anchor
	return &ctl.HelloReply{
		Version: version.Version, PID: os.Getpid(), Domain: a.Hash, Profile: a.Profile,
		Workspace: a.Workspace, Container: c.spec.Name,
	}, nil
}

func (c *coordinator) attached(s *ctlserver.Session) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shuttingDown {
		return ctl.Errorf(ctl.ErrShuttingDown.Code, "the sandbox is shutting down: %s", c.reason)
	}
	c.refs++
	c.sessionAttached(s)
	return nil
}

func (c *coordinator) detached(s *ctlserver.Session) {
	c.sessionDetached(s)
	c.mu.Lock()
	c.refs--
	zero := c.refs == 0
	c.mu.Unlock()
	if zero {
		c.poke()
	}
}

// start brings the sandbox up: recovery, components' Prepare, the
// container, components' Started.
func (c *coordinator) start(ctx context.Context) error {
	a := c.o.Anchor
	if c.spareErr != nil {
		return c.spareErr
	}
	if err := c.openState(ctx); err != nil {
		return err
	}
	var shim string
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		// Both lookups are stats; runsc is checked here so that a missing
		// runsc is a clear error rather than podman's runtime failure.
		var err error
		if shim, err = locate.Find(locate.Shim); err != nil {
			return err
		}
		_, err = locate.Find(locate.Runsc)
		return err
	})
	if c.o.Recover {
		g.Go(func() error { return c.removeLeftovers(gctx) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	c.pm.Runtime = shim
	for _, v := range c.o.Volumes {
		// Volume sources that do not exist yet are the domain's to make.
		if err := os.MkdirAll(v.Host, 0o700); err != nil {
			return fmt.Errorf("volume %s: %w", v.Host, err)
		}
	}
	spec, err := sandbox.NewSpec(c.o.Profile, a, c.o.Volumes)
	if err != nil {
		return err
	}
	c.spec = spec
	c.prepared = len(c.comps)
	if err := prepareAll(ctx, c.comps, spec, c.log); err != nil {
		return err
	}
	sandbox.Finalize(spec, a)
	runStart := time.Now()
	gate, err := openGate(ctx, c.comps, spec, a.GateSocket(), runStart, c.log)
	if err != nil {
		return err
	}
	c.runAttempt = true
	id, err := c.pm.RunDetached(ctx, spec)
	if gerr := gate.finish(err == nil); gerr != nil {
		// The components' own failure explains a run the gate refused.
		return gerr
	}
	if err != nil {
		return err
	}
	c.log.Info("container started", "took", time.Since(runStart).Round(time.Millisecond))
	c.containerID = id
	for _, comp := range c.comps {
		// Measured from the start of podman run: a component finishing its
		// start in the background (the sidecar) costs only what it adds.
		if err := comp.Started(ctx, spec.Name); err != nil {
			return fmt.Errorf("%s: %w", comp.Name(), err)
		}
		c.log.Info("component started", "component", comp.Name(), "after_run", time.Since(runStart).Round(time.Millisecond))
	}
	return nil
}

// removeLeftovers removes every container labelled with this domain: the
// coordinator that made them is dead (its socket did not answer).
func (c *coordinator) removeLeftovers(ctx context.Context) error {
	_, err := c.pm.RemoveLabelled(ctx, domain.LabelKey, c.o.Anchor.Hash)
	return err
}

// beforeStop gives the components that need the running container at
// teardown (the Git Sentry's last ref sync) their turn, in reverse order.
func (c *coordinator) beforeStop() {
	for i := c.prepared - 1; i >= 0; i-- {
		if s, ok := c.comps[i].(BeforeStopper); ok && c.containerID != "" {
			ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
			s.BeforeStop(ctx)
			cancel()
		}
	}
}

// teardown tells the sessions, removes the container, closes the
// components in reverse, and removes the control socket last: while the
// socket answers (with ErrShuttingDown), no new coordinator of this domain
// can start and race this one.
func (c *coordinator) teardown(reason string) {
	c.events.Publish(ctl.Event{Kind: ctl.EventSandboxStopped, Reason: reason})
	if n := len(c.srv.Sessions()); n > 0 {
		c.log.Info("telling sessions", "count", n)
		c.srv.Broadcast(ctl.TypeShutdown, ctl.Shutdown{Reason: reason})
	}
	c.beforeStop()
	if c.runAttempt {
		target := c.containerID
		if target == "" {
			target = c.spec.Name // a failed run may leave a created container
		}
		ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
		start := time.Now()
		if err := c.pm.RemoveContainer(ctx, target, c.o.StopTimeout); err != nil {
			c.log.Error("removing the container", "err", err)
		}
		c.log.Info("container removed", "took", time.Since(start).Round(time.Millisecond))
		cancel()
	}
	// The CA bundle's snapshot was the container's (sandbox.NewSpec): 200
	// KiB of the runtime dir's tmpfs per domain otherwise.
	if err := os.Remove(c.o.Anchor.CABundleSnapshot()); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.log.Error("removing the CA bundle snapshot", "err", err)
	}
	c.handOverToSpare(reason)
	for i := c.prepared - 1; i >= 0; i-- {
		comp := c.comps[i]
		ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
		start := time.Now()
		if err := comp.Close(ctx); err != nil {
			c.log.Error("closing component", "component", comp.Name(), "err", err)
		}
		c.log.Info("component closed", "component", comp.Name(), "took", time.Since(start).Round(time.Millisecond))
		cancel()
	}
	c.leaveSpare(reason)
	c.sweepEndedSpares()
	c.closeState(reason)
	close(c.torndown)
	if c.stopNotify != nil {
		c.stopNotify()
	}
	c.events.Close()
	// Let stop requests get their reply before the connections close.
	c.mu.Lock()
	c.stopClosed = true
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.stopWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	_ = c.srv.Close()
	if err := os.Remove(c.o.Anchor.ControlSocket()); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.log.Error("removing the control socket", "err", err)
	}
}

// listen opens the control socket. A socket file that answers belongs to a
// live coordinator (an error); one that does not is removed.
func listen(path string) (*net.UnixListener, error) {
	ln, err := ctlserver.Listen(path)
	if err == nil {
		return ln, nil
	}
	if _, serr := os.Lstat(path); serr != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if nc, derr := net.DialTimeout("unix", path, time.Second); derr == nil {
		nc.Close()
		return nil, fmt.Errorf("control socket %s: another coordinator is running", path)
	}
	if rerr := os.Remove(path); rerr != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, rerr)
	}
	return ctlserver.Listen(path)
}
