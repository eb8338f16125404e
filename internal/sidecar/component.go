package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/domain"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/netd/api"
	"github.com/lazaret-dev/lazaret/internal/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/podman"
)

// DefaultUplink is the sidecar's --network: slirp4netns gives the rootless
// namespace its uplink (measured: works with a runc sidecar, nftables and
// IPv6 here). Its default keeps the host's loopback unreachable.
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
	// Image is the sidecar image; ImageRef() when empty. A missing image
	// is built from the lazaret-netd found by locate.
	Image string
	// Runtime runs the sidecar: runc (or crun), never runsc — nftables
	// must act on the host kernel's namespace.
	Runtime string
	// Uplink is the sidecar's --network; DefaultUplink when empty.
	Uplink string
	// Upstreams are netd's upstream resolvers; SlirpResolver when empty.
	Upstreams []string
	// NetdArgs are extra lazaret-netd flags (tests: --min-ttl).
	NetdArgs []string
	// ReadyTimeout bounds the wait for the ruleset; 20 s when zero.
	ReadyTimeout time.Duration
}

// Component runs the Network Sidecar of one sandbox. Prepare starts it and
// returns only once netd reports its ruleset installed; the agent container
// then joins its network namespace.
type Component struct {
	o       Options
	err     error // a policy the configuration could not express
	started bool
}

// NewComponent is the coordinator's constructor: the profile's merged
// allow_egress and allow_domains become the initial policy.
func NewComponent(p *config.Profile, a *domain.Anchor, pm *podman.Client, log *slog.Logger) *Component {
	pol, err := PolicyOf(p)
	c := New(Options{Anchor: a, Policy: pol, Podman: pm, Log: log})
	if err != nil {
		c.err = fmt.Errorf("profile %s: %w", p.Name, err)
	}
	return c
}

// New returns a Component for o.
func New(o Options) *Component {
	if o.Image == "" {
		o.Image = ImageRef()
	}
	if o.Runtime == "" {
		o.Runtime = "runc"
	}
	if o.Uplink == "" {
		o.Uplink = DefaultUplink
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
	return &Component{o: o}
}

// Name implements sandbox.Component.
func (c *Component) Name() string { return "netd" }

// Client returns the control client of the domain's sidecar.
func Client(a *domain.Anchor) *api.Client { return &api.Client{Socket: a.NetdSocket()} }

// ErrSidecarFailed is returned when the sidecar exits or never reports its
// ruleset installed; the sandbox must not start.
var ErrSidecarFailed = errors.New("network sidecar failed")

// Spec returns the sidecar's container spec (without the control
// descriptor, which Prepare passes).
func (c *Component) Spec() (*podman.ContainerSpec, error) {
	pol, err := jsonPolicy(c.o.Policy)
	if err != nil {
		return nil, err
	}
	cmd := []string{"--control-fd", "3", "--policy", pol}
	for _, u := range c.o.Upstreams {
		cmd = append(cmd, "--upstream", u)
	}
	cmd = append(cmd, c.o.NetdArgs...)
	return &podman.ContainerSpec{
		Name:    c.o.Anchor.Sidecar(),
		Image:   c.o.Image,
		Runtime: c.o.Runtime,
		Labels:  map[string]string{domain.LabelKey: c.o.Anchor.Hash, RoleLabel: "netd"},
		Network: c.o.Uplink,
		// NET_ADMIN for nftables, SO_MARK and nflog; NET_BIND_SERVICE for
		// the resolver on port 53 (resolv.conf cannot name a port). Both
		// act only on the sidecar's own namespace, which the rootless user
		// namespace owns. Lowering ip_unprivileged_port_start instead
		// would let the agent bind :53 in the shared namespace too.
		CapDrop:     []string{"ALL"},
		CapAdd:      []string{"NET_ADMIN", "NET_BIND_SERVICE"},
		SecurityOpt: []string{"no-new-privileges"},
		PidsLimit:   32,
		// The agent joins this namespace and inherits this resolv.conf:
		// podman refuses --dns on a --network container: container
		// (measured: "conflicting options: dns and the network mode").
		DNS:       []string{"127.0.0.1"},
		ExtraArgs: []string{"--read-only", "--preserve-fds", "1", "--log-driver", "k8s-file"},
		Command:   cmd,
	}, nil
}

// Prepare starts the sidecar, waits until its ruleset is installed (fail
// closed), and points spec at the sidecar's network namespace.
func (c *Component) Prepare(ctx context.Context, spec *podman.ContainerSpec) error {
	if c.err != nil {
		return c.err
	}
	sspec, err := c.Spec()
	if err != nil {
		return err
	}
	args, err := c.o.Podman.RunArgs(sspec)
	if err != nil {
		return err
	}
	ln, err := listenControl(c.o.Anchor.NetdSocket())
	if err != nil {
		return err
	}
	lf, err := ln.File()
	ln.Close() // the duplicate in lf keeps the socket listening
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	// Closed once the last run has handed it to netd: from then on a
	// connection is refused as soon as netd is gone.
	defer lf.Close()
	c.started = true
	// Whether the image holds the installed lazaret-netd is checked while
	// the sidecar starts (a podman call each, ~50 and ~240 ms, on the cold
	// start's critical path); a stale or missing image — a new development
	// build, or a first start — is rebuilt and the sidecar started again.
	// The agent starts only after Prepare returns, so a stale sidecar never
	// serves it.
	checked := make(chan error, 1)
	var build bool
	go func() {
		var err error
		build, err = c.imageStale(ctx)
		checked <- err
	}()
	runErr := c.run(ctx, args, lf)
	if err := <-checked; err != nil {
		return err
	}
	if build {
		if runErr == nil {
			if err := c.o.Podman.RemoveContainer(ctx, sspec.Name, 0); err != nil {
				return fmt.Errorf("%w: removing the sidecar started from a stale image: %v", ErrSidecarFailed, err)
			}
		}
		c.o.Log.Info("building the sidecar image", "image", c.o.Image)
		if err := c.buildImage(ctx); err != nil {
			return err
		}
		runErr = c.run(ctx, args, lf)
	}
	lf.Close()
	if runErr != nil {
		return runErr
	}
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	c.o.Log.Info("network sidecar ready", "name", sspec.Name)
	spec.Network = "container:" + sspec.Name
	spec.DNS = nil
	return nil
}

// run starts the sidecar container with the control socket as its fd 3.
func (c *Component) run(ctx context.Context, args []string, control *os.File) error {
	cmd := c.o.Podman.Command(ctx, args...)
	cmd.ExtraFiles = []*os.File{control} // becomes fd 3 in the sidecar (--preserve-fds 1)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: podman run: %s", ErrSidecarFailed, lastLine(stderr.String(), err))
	}
	return nil
}

// Started implements sandbox.Component.
func (c *Component) Started(context.Context, string) error { return nil }

// Close stops and removes the sidecar (and any container still joined to
// its namespace) and its control socket. Removing the
// sidecar ends slirp4netns, so a namespace the agent still holds has no
// uplink left; its ruleset stays until the namespace goes.
func (c *Component) Close(ctx context.Context) error {
	if !c.started {
		return nil
	}
	var errs []error
	// --depend: a container still joined to the namespace would otherwise
	// block the removal (measured: "has dependent containers which must be
	// removed before it").
	if err := c.o.Podman.RemoveContainer(ctx, c.o.Anchor.Sidecar(), 2*time.Second); err != nil {
		errs = append(errs, fmt.Errorf("remove sidecar: %w", err))
	}
	if err := os.Remove(c.o.Anchor.NetdSocket()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	c.started = false
	return errors.Join(errs...)
}

// imageStale reports whether the sidecar image must be built: it is
// missing or holds another lazaret-netd than the one installed beside
// lazaret (a build takes about a second and needs no network). Without an
// installed lazaret-netd an existing image is used as it is.
func (c *Component) imageStale(ctx context.Context) (bool, error) {
	bin, ferr := locate.Find(locate.Netd)
	if ferr != nil {
		ok, err := ImageExists(ctx, c.o.Podman, c.o.Image)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, fmt.Errorf("sidecar image %s missing and %w", c.o.Image, ferr)
		}
		return false, nil
	}
	ok, err := ImageCurrent(ctx, c.o.Podman, c.o.Image, bin)
	return !ok, err
}

func (c *Component) buildImage(ctx context.Context) error {
	bin, err := locate.Find(locate.Netd)
	if err != nil {
		return err
	}
	return BuildImage(ctx, c.o.Podman, bin, c.o.Image)
}

// listenControl creates the control socket (0600) in the private runtime
// dir, replacing a stale one.
func listenControl(path string) (*net.UnixListener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("stale control socket: %w", err)
	}
	old := unix.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	return ln, nil
}

// waitReady polls netd's status every 10 ms until it reports its ruleset
// applied. Whether the container still runs is asked of podman (a ~50 ms
// call) only every half second or when the socket refuses connections
// (nobody holds it open any more), so a failing sidecar is reported with
// its last log line instead of after the timeout.
func (c *Component) waitReady(ctx context.Context) error {
	cl := &api.Client{Socket: c.o.Anchor.NetdSocket(), Timeout: 2 * time.Second}
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
			state, ierr := c.o.Podman.Output(ctx, "inspect", "--format", "{{.State.Status}}", c.o.Anchor.Sidecar())
			if s := strings.TrimSpace(string(state)); ierr == nil && s != "running" && s != "created" {
				logs, _ := c.o.Podman.Output(ctx, "logs", c.o.Anchor.Sidecar())
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

func lastLine(s string, err error) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" && err != nil {
		return err.Error()
	}
	return s
}
