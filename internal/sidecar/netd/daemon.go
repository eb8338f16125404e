// Package netd is lazaret-netd, the Network Sidecar: it installs the
// egress ruleset in the sandbox's network namespace before anything else
// runs there, answers DNS for allowed names (adding their addresses to the
// allow sets), counts denials, and takes policy changes over its control
// socket.
package netd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/sidecar/firewall"
	"github.com/lazaret-dev/lazaret/internal/sidecar/secretproxy"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// Config configures the daemon.
type Config struct {
	Policy    netpolicy.Policy
	Upstreams []netip.AddrPort
	// Listen are the resolver's addresses (127.0.0.1:53 and [::1]:53).
	Listen []netip.AddrPort
	// ControlPath is the control socket to create; ControlFD, when > 0, is
	// an already listening socket handed over by the host instead.
	ControlPath string
	ControlFD   int
	// MinTTL and MaxTTL clamp the TTLs of the answers returned.
	MinTTL, MaxTTL time.Duration
	// Grace is how long a resolved address stays allowed at least, from
	// the last answer that named it: clients cache addresses well past
	// the TTL (npm, long-lived HTTP clients); DefaultGrace when zero.
	Grace time.Duration
	// HostAddrs are the host's own addresses (every interface, as the
	// host sees them); an answer naming one of them opens nothing.
	HostAddrs []netip.Addr
	// InjectListen is the secret injector's address in the namespace
	// (DefaultInjectListen when zero); the resolver answers the secrets'
	// hosts with it.
	InjectListen netip.AddrPort
	// NoFirewall is pod mode (Kubernetes, docs/NETWORK.md): every
	// container of the pod runs in one gVisor sandbox whose netstack has
	// no nftables (measured: the netlink socket is refused with "protocol
	// not supported") and iptables only behind a node-wide runsc flag. netd
	// then installs nothing, sets no socket mark and reads no nflog: it is
	// the DNS allowlist resolver (and the secret injector) only, and
	// IP-level egress is the NetworkPolicy's job.
	NoFirewall bool
	// Secrets, when set, starts the injector at start as an OpSecrets
	// request would (pod mode: LoadPodSecrets).
	Secrets *netdapi.Request
	// SpareExpiry, when set, starts netd as a spare: ready before any
	// sandbox uses its namespace, it waits for an OpClaim (which brings
	// the sandbox's policy and the host's addresses) and exits if none
	// came within this time.
	SpareExpiry time.Duration
	// SpareKey is what a claim must name (OpClaim's SpareKey): the
	// coordinator's digest of the image, upstreams and flags it starts
	// netd with, so that a spare started otherwise is never claimed.
	SpareKey string
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
	Log *slog.Logger
}

// FirewallNone is Status.Firewall in pod mode.
const FirewallNone = "none (pod mode: IP-level egress is enforced by the pod's NetworkPolicy, domains by DNS only)"

// DefaultGrace is Config.Grace when zero.
const DefaultGrace = 10 * time.Minute

// Daemon is one running netd.
type Daemon struct {
	cfg Config
	log *slog.Logger

	nftMu sync.Mutex // one netlink transaction at a time
	nft   *firewall.Conn
	// opMu serialises policy changes (control requests, expiry) from
	// reading the policy to storing it after the kernel took it, so the
	// reported policy is always the installed one.
	opMu sync.Mutex

	mu        sync.Mutex
	policy    netpolicy.Policy // with expiries; Active() is what is installed
	filter    *netpolicy.LearnFilter
	applied   bool
	resolved  map[netip.Addr]netdapi.Resolved
	denials   map[string]*netdapi.Denial
	changes   []netdapi.Change
	denialLog string
	wake      chan struct{} // re-arms the expiry timer
	inflight  chan struct{} // bounds concurrent upstream queries
	events    *eventRing    // denials for the coordinator's notices
	holds     *holds        // denied names waiting for the user
	proxy     *secretproxy.Proxy
	injecting []string // the secrets' hosts

	// spare is this netd's state as a spare (Config.SpareExpiry):
	// waiting, then claimed or expired, once; changed under opMu.
	spare     atomic.Int32
	spareDone chan struct{} // closed when the spare is claimed
}

// New checks cfg and returns a daemon that has not touched the namespace.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.MinTTL <= 0 {
		cfg.MinTTL = 30 * time.Second
	}
	if cfg.MaxTTL < cfg.MinTTL {
		cfg.MaxTTL = max(time.Hour, cfg.MinTTL)
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if !cfg.InjectListen.IsValid() {
		cfg.InjectListen = DefaultInjectListen
	}
	if len(cfg.Listen) == 0 {
		cfg.Listen = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53"), netip.MustParseAddrPort("[::1]:53")}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{
		cfg:       cfg,
		log:       log,
		policy:    cfg.Policy,
		filter:    netpolicy.NewLearnFilter(cfg.HostAddrs),
		resolved:  map[netip.Addr]netdapi.Resolved{},
		denials:   map[string]*netdapi.Denial{},
		denialLog: "counters only",
		wake:      make(chan struct{}, 1),
		inflight:  make(chan struct{}, 64),
		events:    newEventRing(),
		holds:     newHolds(),
		spareDone: make(chan struct{}),
	}
	if cfg.SpareExpiry > 0 {
		d.spare.Store(spareWaiting)
	}
	return d, nil
}

// Run installs the ruleset and serves until ctx ends. The ruleset is
// installed first and any failure returns at once, so the sidecar exits
// non-zero and the sandbox never starts on an open namespace. On return
// the ruleset stays in place: a namespace without netd denies everything.
func (d *Daemon) Run(ctx context.Context) error {
	var closers []func() error
	defer func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}()
	if d.cfg.NoFirewall {
		d.mu.Lock()
		d.denialLog = "dns only"
		d.mu.Unlock()
		d.log.Warn("pod mode: no firewall in this sandbox; IP-level egress is the NetworkPolicy's job and domains are allowed by DNS only",
			"policy", describe(d.policy.Active(time.Now())))
	} else {
		c, err := d.installFirewall()
		if err != nil {
			return err
		}
		closers = append(closers, c...)
	}

	for _, addr := range d.cfg.Listen {
		uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		if err != nil {
			if addr.Addr().Is6() && errors.Is(err, unix.EADDRNOTAVAIL) {
				d.log.Warn("no IPv6 loopback; resolver on IPv4 only", "err", err)
				continue
			}
			return fmt.Errorf("resolver %s: %w", addr, err)
		}
		closers = append(closers, uc.Close)
		go d.serveUDP(ctx, uc)
		tl, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
		if err != nil {
			return fmt.Errorf("resolver %s/tcp: %w", addr, err)
		}
		closers = append(closers, tl.Close)
		go d.serveTCP(ctx, tl)
	}

	if d.cfg.ControlFD > 0 || d.cfg.ControlPath != "" || !d.cfg.NoFirewall {
		ctl, err := d.controlListener()
		if err != nil {
			return err
		}
		closers = append(closers, ctl.Close)
		go d.serveControl(ctx, ctl)
	}

	if d.cfg.Secrets != nil {
		if err := d.startInjector(ctx, *d.cfg.Secrets); err != nil {
			return fmt.Errorf("secrets: %w", err)
		}
		d.cfg.Secrets = nil // netd keeps the values in the injector only
	}
	d.mu.Lock()
	d.applied = true
	d.mu.Unlock()
	d.log.Info("ready", "upstreams", d.cfg.Upstreams, "control", d.cfg.ControlPath)
	if d.cfg.SpareExpiry > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go d.expireSpare(ctx, cancel)
	}
	return d.expiryLoop(ctx)
}
