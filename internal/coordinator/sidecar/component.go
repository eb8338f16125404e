// Package sidecar is the coordinator's side of the Network Sidecar: it
// starts the sidecar container that owns a sandbox's network namespace,
// talks to lazaret-netd over its control socket, watches it and relays its
// denial notices. The image itself is internal/netdimage.
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/netns"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/netdimage"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// DefaultUplink is podman's --network for the uplink the sandbox's
// namespace gets: slirp4netns with IPv6 (measured: works with a runc
// sidecar, nftables and IPv6 here), the host's loopback unreachable. The
// sidecar attaches the same slirp4netns itself (netns.Client.StartUplink) to the
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
	uplink  *netns.Uplink
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
	if err := netns.Reserve(c.o.Anchor.Netns()); err != nil {
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
		if err := c.ns().Remove(ctx, c.o.Anchor.Netns()); err != nil {
			errs = append(errs, err)
		}
		c.netns = false
	}
	return errors.Join(errs...)
}

// netns runs the namespace's programs (pin, uplink, cut).
func (c *Component) ns() *netns.Client { return netns.New(c.o.Podman) }
