// Package sidecar is the coordinator's side of the Network Sidecar: it
// starts the sidecar container that owns a sandbox's network namespace,
// talks to lazaret-netd over its control socket, watches it and relays its
// denial notices. The image itself is internal/netdimage.
package sidecar

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/domain"
	"github.com/lazaret-dev/lazaret/internal/execx"
	"github.com/lazaret-dev/lazaret/internal/netdapi"
	"github.com/lazaret-dev/lazaret/internal/netdimage"
	"github.com/lazaret-dev/lazaret/internal/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/podman"
	"github.com/lazaret-dev/lazaret/internal/secret"
	"github.com/lazaret-dev/lazaret/internal/unixsock"
	"github.com/lazaret-dev/lazaret/internal/version"
)

// DefaultUplink is podman's --network for the uplink the sandbox's
// namespace gets: slirp4netns with IPv6 (measured: works with a runc
// sidecar, nftables and IPv6 here), the host's loopback unreachable. The
// sidecar attaches the same slirp4netns itself (podman.StartUplink) to the
// namespace it pins; tests start their comparison containers with it.
const DefaultUplink = "slirp4netns:enable_ipv6=true"

// SlirpResolver is slirp4netns's built-in DNS forwarder, netd's upstream
// with the default uplink.
const SlirpResolver = "10.0.2.3"

// RoleLabel marks the sidecar among a domain's containers.
const RoleLabel = "lazaret.role"

// Options configures a Component.
type Options struct {
	Anchor *domain.Anchor
	Policy netpolicy.Policy
	Podman *podman.Client
	Log    *slog.Logger
	// Image is the sidecar image; when empty, the content tag of the
	// installed lazaret-netd (InstalledImageRef), built when missing. An
	// explicit image (tests) is used as it is.
	Image string
	// Runtime runs the sidecar: runc (or crun), never runsc — nftables
	// must act on the host kernel's namespace.
	Runtime string
	// Upstreams are netd's upstream resolvers; SlirpResolver when empty.
	Upstreams []string
	// NetdArgs are extra lazaret-netd flags (tests: --min-ttl).
	NetdArgs []string
	// ReadyTimeout bounds the wait for the ruleset; 20 s when zero.
	ReadyTimeout time.Duration
	// HostAddrs lists the host's own addresses, which no DNS answer
	// opens; HostAddrs (this package's) when nil. Tests name others.
	HostAddrs func() ([]netip.Addr, error)
	// CABundle is the profile's trust store: with secrets, the upstream
	// servers are verified against it and the host's.
	CABundle config.CABundle
	// SpareExpiry, when set, makes a start claim the domain's spare
	// sidecar when one waits, and StartSpare leave one for the next
	// start, which exits unclaimed after this time. Zero: no spares.
	SpareExpiry time.Duration
}

// Component runs the Network Sidecar of one sandbox. Prepare pins a new
// network namespace with nothing but loopback, points the agent's spec at
// it and starts the sidecar into it in the background, so the agent
// container and the sidecar start at the same time; Started returns once
// netd reports its ruleset installed and only then attaches the uplink
// (slirp4netns). Until then nothing in the namespace can reach anything,
// and the coordinator lets no command into the sandbox before Started.
type Component struct {
	o         Options
	err       error // a policy the configuration could not express
	autoImage bool  // o.Image was empty: Prepare picks the content tag

	netns   bool               // the namespace's pin may exist
	cancel  context.CancelFunc // stops the background start
	pinned  chan struct{}      // closed when the namespace is pinned (or failed to be)
	pinE    error              // that result, read after pinned is closed
	ready   chan struct{}      // closed when the background start ended
	readyE  error              // its result, read after ready is closed
	uplink  *podman.Uplink
	started bool // the sidecar container may exist (set by the background start)
	// handOver: Close leaves the container, its socket and its pin for
	// StartSpare, which replaces them (see HandOverToSpare).
	handOver bool
	pinOnce  sync.Once

	hostAddrs []netip.Addr  // what netd was last told
	closing   chan struct{} // closed when Close begins: Watch ends quietly
	closeOnce sync.Once
	mu        sync.Mutex // guards uplink between Close and Watch

	onDenials   func(context.Context, *netdapi.Client) // see OnDenials
	denialsOnce sync.Once

	secrets *Secrets   // see WithSecrets
	ca      *secret.CA // the sandbox's interception CA
	roots   []byte     // PEM roots netd verifies upstreams with
}

// NewComponent is the coordinator's constructor: the profile's merged
// allow_egress and allow_domains become the initial policy.
func NewComponent(p *config.Profile, a *domain.Anchor, pm *podman.Client, log *slog.Logger) *Component {
	pol, err := PolicyOf(p)
	c := New(Options{Anchor: a, Policy: pol, Podman: pm, Log: log, CABundle: p.CABundle})
	if err != nil {
		c.err = fmt.Errorf("profile %s: %w", p.Name, err)
	}
	return c
}

// New returns a Component for o.
func New(o Options) *Component {
	auto := o.Image == ""
	if auto {
		o.Image = netdimage.ImageRef()
	}
	if o.Runtime == "" {
		o.Runtime = "runc"
	}
	if len(o.Upstreams) == 0 {
		o.Upstreams = []string{SlirpResolver}
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 20 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.HostAddrs == nil {
		o.HostAddrs = HostAddrs
	}
	return &Component{o: o, autoImage: auto, closing: make(chan struct{})}
}

// WithSpares sets Options.SpareExpiry: the start claims a waiting spare,
// and StartSpare leaves one that waits this long.
func (c *Component) WithSpares(expiry time.Duration) *Component {
	c.o.SpareExpiry = expiry
	return c
}

// Name implements sandbox.Component.
func (c *Component) Name() string { return "netd" }

// Client returns the control client of the domain's sidecar.
func Client(a *domain.Anchor) *netdapi.Client { return &netdapi.Client{Socket: a.NetdSocket()} }

// ErrSidecarFailed is returned when the sidecar exits or never reports its
// ruleset installed; the sandbox must not start.
var ErrSidecarFailed = errors.New("network sidecar failed")

// Spec returns the sidecar's container spec (without the control
// descriptor, which the start passes).
func (c *Component) Spec() (*podman.ContainerSpec, error) { return c.spec(false) }

// spec is the sidecar's container spec; with spare, a spare's: no policy
// and no host addresses yet (its claim brings them), the spare's key and
// expiry, removed by podman when it exits unclaimed.
func (c *Component) spec(spare bool) (*podman.ContainerSpec, error) {
	pol, err := jsonPolicy(c.o.Policy)
	if err != nil {
		return nil, err
	}
	if spare {
		pol = "{}"
	}
	cmd := []string{"--control-fd", "3", "--policy", pol}
	for _, u := range c.o.Upstreams {
		cmd = append(cmd, "--upstream", u)
	}
	labels := map[string]string{domain.LabelKey: c.o.Anchor.Hash, RoleLabel: "netd"}
	// RunArgs's --replace removes a spare the start did not claim: one
	// sidecar per domain, and only its coordinator runs it.
	extra := []string{"--pull=never", "--read-only", "--preserve-fds", "1", "--log-driver", "k8s-file"}
	if spare {
		cmd = append(cmd, "--spare-expiry", c.o.SpareExpiry.String(), "--spare-key", c.spareKey())
		labels[domain.LabelSpare] = c.o.Anchor.DataRoot
		extra = append(extra, "--rm")
	} else {
		for _, a := range c.hostAddrs {
			cmd = append(cmd, "--host-addr", a.String())
		}
	}
	cmd = append(cmd, c.o.NetdArgs...)
	return &podman.ContainerSpec{
		Name:    c.o.Anchor.Sidecar(),
		Image:   c.o.Image,
		Runtime: c.o.Runtime,
		Labels:  labels,
		Network: "ns:" + c.o.Anchor.Netns(),
		// NET_ADMIN for nftables, SO_MARK and nflog; NET_BIND_SERVICE for
		// the resolver on port 53 (resolv.conf cannot name a port). Both
		// act only on the sidecar's own namespace, which the rootless user
		// namespace owns. Lowering ip_unprivileged_port_start instead
		// would let the agent bind :53 in the shared namespace too.
		CapDrop:     []string{"ALL"},
		CapAdd:      []string{"NET_ADMIN", "NET_BIND_SERVICE"},
		SecurityOpt: []string{"no-new-privileges"},
		PidsLimit:   32,
		// A working directory spares podman 4 its two look-ups of the
		// image's /etc/passwd, each a re-exec of podman itself
		// (chrootuser-open): 130 ms of the sidecar's start here, and CPU
		// taken from the agent's own podman run beside it.
		Workdir:   "/",
		ExtraArgs: extra,
		Command:   cmd,
	}, nil
}

// Prepare points spec at the sandbox's network namespace, with netd's
// resolver, and in the background claims the domain's spare sidecar or
// else pins a new namespace and starts the sidecar into it (Ready when
// the namespace is pinned, Started when the ruleset is in and the uplink
// attached).
func (c *Component) Prepare(ctx context.Context, spec *podman.ContainerSpec) error {
	if c.err != nil {
		return c.err
	}
	if c.secrets != nil {
		if err := c.prepareSecrets(spec, &c.o.CABundle); err != nil {
			return err
		}
	}
	// A policy netd cannot be given fails the start here, not later.
	if _, err := jsonPolicy(c.o.Policy); err != nil {
		return err
	}
	var err error
	// Without the host's addresses netd could open them: fail the start.
	if c.hostAddrs, err = c.o.HostAddrs(); err != nil {
		return fmt.Errorf("%w: %w", ErrSidecarFailed, err)
	}
	// The agent's podman run needs only the pin's file (it checks that
	// the path exists; runsc joins the namespace at create, which the
	// start gate holds until Ready). The namespace itself is pinned (or
	// the spare's, already pinned there, claimed) in the background.
	c.netns = true
	if err := podman.ReserveNetns(c.o.Anchor.Netns()); err != nil {
		return fmt.Errorf("%w: %w", ErrSidecarFailed, err)
	}
	// The background start outlives Prepare's context (prepareAll cancels
	// it when every component has returned); Close cancels it.
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel, c.ready, c.pinned = cancel, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(c.ready)
		c.readyE = c.startInBackground(bctx)
		c.pin(c.readyE) // when it failed before the pin
	}()
	spec.Network = "ns:" + c.o.Anchor.Netns()
	spec.DNS = []string{"127.0.0.1"}
	return nil
}

// pin reports the namespace pinned (err nil) or not pinnable, once.
func (c *Component) pin(err error) {
	c.pinOnce.Do(func() {
		c.pinE = err
		close(c.pinned)
	})
}

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
	if err := c.o.Podman.CreateNetns(ctx, c.o.Anchor.Netns()); err != nil {
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
	if pinned, err := c.o.Podman.NetnsPinned(ctx, c.o.Anchor.Netns()); err != nil || !pinned {
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

// Ready implements sandbox.Deferred: the agent's runtime may join the
// namespace once it is pinned (the sidecar's own start goes on; Started
// waits for it).
func (c *Component) Ready(ctx context.Context) error {
	if c.pinned == nil {
		return nil
	}
	select {
	case <-c.pinned:
		return c.pinE
	case <-ctx.Done():
		return ctx.Err()
	}
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
	u, err := c.o.Podman.StartUplink(ctx, c.o.Anchor.Netns(), podman.UplinkOptions{IPv6: true})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSidecarFailed, err)
	}
	c.mu.Lock()
	c.uplink = u
	c.mu.Unlock()
	c.o.Log.Info("network sidecar ready", "name", name)
	return nil
}

// Started implements sandbox.Component: it returns once the sidecar has
// installed its ruleset and the uplink is attached.
func (c *Component) Started(ctx context.Context, _ string) error {
	if c.ready == nil {
		return nil
	}
	select {
	case <-c.ready:
		if c.readyE == nil {
			c.startDenials()
		}
		return c.readyE
	case <-ctx.Done():
		return ctx.Err()
	}
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
	if err := podman.ReserveNetns(a.Netns()); err != nil {
		return fmt.Errorf("%w: %w", ErrSidecarFailed, err)
	}
	if err := c.o.Podman.CreateNetns(ctx, a.Netns()); err != nil {
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
	if err := c.o.Podman.RemoveNetns(ctx, a.Netns()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// errSpareUnpinned: the spare's socket is there but its namespace pin is not.
var errSpareUnpinned = errors.New("the spare's network namespace is no longer pinned")

// errImageMissing: podman run found no such image (--pull=never).
var errImageMissing = errors.New("sidecar image missing")

// Close stops the uplink, removes the sidecar, unpins the namespace and
// removes the control socket. The agent container is removed first (by the
// coordinator); the namespace is freed when its last process is gone.
func (c *Component) Close(ctx context.Context) error {
	c.closeOnce.Do(func() { close(c.closing) })
	if c.cancel != nil {
		c.cancel()
		<-c.ready
		c.cancel = nil
	}
	var errs []error
	c.mu.Lock()
	u := c.uplink
	c.uplink = nil
	c.mu.Unlock()
	u.Stop() // nil-safe
	// The secrets' trust store was the agent container's, gone by now: 200
	// KiB of the runtime dir per domain otherwise (a spare needs none).
	if err := os.Remove(c.o.Anchor.InjectBundle()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if c.handOver {
		return errors.Join(errs...)
	}
	if c.started {
		// --depend: a container still joined to the namespace (by
		// --network container:) would otherwise block the removal.
		if err := c.o.Podman.RemoveContainer(ctx, c.o.Anchor.Sidecar(), 2*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("remove sidecar: %w", err))
		}
		c.started = false
	}
	if err := os.Remove(c.o.Anchor.NetdSocket()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if c.netns {
		if err := c.o.Podman.RemoveNetns(ctx, c.o.Anchor.Netns()); err != nil {
			errs = append(errs, err)
		}
		c.netns = false
	}
	return errors.Join(errs...)
}

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
