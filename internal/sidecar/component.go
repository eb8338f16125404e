package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
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
	if err := c.ensureImage(ctx); err != nil {
		return err
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
	c.started = true
	cmd := c.o.Podman.Command(ctx, args...)
	cmd.ExtraFiles = []*os.File{lf} // becomes fd 3 in the sidecar (--preserve-fds 1)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	lf.Close()
	if err != nil {
		return fmt.Errorf("%w: podman run: %s", ErrSidecarFailed, lastLine(stderr.String(), err))
	}
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	c.o.Log.Info("network sidecar ready", "name", sspec.Name)
	spec.Network = "container:" + sspec.Name
	spec.DNS = nil
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

// ensureImage builds the sidecar image when it is missing or holds another
// lazaret-netd than the one installed beside lazaret (a build takes about
// a second and needs no network).
func (c *Component) ensureImage(ctx context.Context) error {
	bin, ferr := locate.Find(locate.Netd)
	if ferr != nil {
		ok, err := ImageExists(ctx, c.o.Podman, c.o.Image)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		return fmt.Errorf("sidecar image %s missing and %w", c.o.Image, ferr)
	}
	ok, err := ImageCurrent(ctx, c.o.Podman, c.o.Image, bin)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	c.o.Log.Info("building the sidecar image", "image", c.o.Image, "from", bin)
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

func (c *Component) waitReady(ctx context.Context) error {
	cl := &api.Client{Socket: c.o.Anchor.NetdSocket(), Timeout: 2 * time.Second}
	deadline := time.Now().Add(c.o.ReadyTimeout)
	for {
		st, err := cl.Status(ctx)
		if err == nil && st.Applied {
			return nil
		}
		state, ierr := c.o.Podman.Output(ctx, "inspect", "--format", "{{.State.Status}}", c.o.Anchor.Sidecar())
		if ierr == nil && strings.TrimSpace(string(state)) != "running" && strings.TrimSpace(string(state)) != "created" {
			logs, _ := c.o.Podman.Output(ctx, "logs", c.o.Anchor.Sidecar())
			return fmt.Errorf("%w: sidecar %s: %s", ErrSidecarFailed, strings.TrimSpace(string(state)), lastLine(string(logs), nil))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: ruleset not reported installed within %v (last: %v)", ErrSidecarFailed, c.o.ReadyTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
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
