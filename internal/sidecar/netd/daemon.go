// Package netd is lazaret-netd, the Network Sidecar: it installs the
// egress ruleset in the sandbox's network namespace before anything else
// runs there, answers DNS for allowed names (adding their addresses to the
// allow sets), counts denials, and takes policy changes over its control
// socket.
package netd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/netdapi"
	"github.com/lazaret-dev/lazaret/internal/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/sidecar/firewall"
	"github.com/lazaret-dev/lazaret/internal/sidecar/secretproxy"
	"github.com/lazaret-dev/lazaret/internal/unixsock"
	"github.com/lazaret-dev/lazaret/internal/version"
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

type spareState = int32

const (
	notSpare spareState = iota
	spareWaiting
	spareClaimed
	spareExpired
)

const (
	maxDenials = 512
	maxChanges = 100
)

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

// expireSpare ends an unclaimed spare after Config.SpareExpiry: a spare
// nobody claims must not stay forever.
func (d *Daemon) expireSpare(ctx context.Context, stop context.CancelFunc) {
	t := time.NewTimer(d.cfg.SpareExpiry)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-d.spareDone:
		return
	case <-t.C:
	}
	d.opMu.Lock()
	defer d.opMu.Unlock()
	if d.spare.Load() != spareWaiting {
		return
	}
	d.spare.Store(spareExpired)
	d.log.Info("spare not claimed; exiting", "after", d.cfg.SpareExpiry)
	stop()
}

// claim makes this spare the sidecar of a starting sandbox (OpClaim):
// the host's addresses first, then the sandbox's policy, each installed
// before the answer. Called under opMu.
func (d *Daemon) claim(req netdapi.Request) error {
	switch d.spare.Load() {
	case notSpare:
		return errors.New("not a spare: nothing to claim")
	case spareClaimed:
		return errors.New("this spare was claimed already")
	case spareExpired:
		return errors.New("this spare expired")
	}
	if req.SpareKey != d.cfg.SpareKey {
		return fmt.Errorf("spare key %q, the claim names %q: started for another configuration", d.cfg.SpareKey, req.SpareKey)
	}
	if req.Policy == nil {
		return errors.New("claim without a policy")
	}
	if err := req.Policy.Validate(); err != nil {
		return err
	}
	if err := d.setHostAddrs(req.Addrs, req.Reason); err != nil {
		return err
	}
	if err := d.commit(req.Policy.Active(time.Now()), req.Reason+": set policy "+describe(*req.Policy)); err != nil {
		return err
	}
	d.spare.Store(spareClaimed)
	close(d.spareDone)
	return nil
}

// installFirewall installs the ruleset (one transaction) and starts the
// nflog reader; it returns what to close on exit.
func (d *Daemon) installFirewall() ([]func() error, error) {
	nft, err := firewall.Dial()
	if err != nil {
		return nil, err
	}
	d.nft = nft
	now := time.Now()
	if err := firewall.Install(nft, netpolicy.Build(d.policy.Active(now), d.hostAddrs())); err != nil {
		return nil, err
	}
	d.logChange("installed ruleset: " + describe(d.policy.Active(now)))
	nl, err := openNflog(netpolicy.DenyLogGroup, netpolicy.DenyLogSnaplen)
	if err != nil {
		d.log.Warn("denials counted per rule only", "err", err)
		return nil, nil
	}
	d.mu.Lock()
	d.denialLog = "nflog"
	d.mu.Unlock()
	go nl.run(d.packetDenied)
	return []func() error{nl.close}, nil
}

// withNft runs f on the netlink connection, one transaction at a time; in
// pod mode (no firewall) it does nothing.
func (d *Daemon) withNft(f func(*firewall.Conn) error) error {
	if d.cfg.NoFirewall {
		return nil
	}
	d.nftMu.Lock()
	defer d.nftMu.Unlock()
	return f(d.nft)
}

func (d *Daemon) controlListener() (net.Listener, error) {
	if d.cfg.ControlFD > 0 {
		f := os.NewFile(uintptr(d.cfg.ControlFD), "control")
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("control socket fd %d: %w", d.cfg.ControlFD, err)
		}
		return l, nil
	}
	if d.cfg.ControlPath == "" {
		return nil, fmt.Errorf("no control socket configured")
	}
	os.Remove(d.cfg.ControlPath) // a leftover of an earlier run
	// Not through the umask: it is process-wide (internal/unixsock).
	l, err := unixsock.Listen(d.cfg.ControlPath)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return l, nil
}

// expiryLoop removes expired entries from the installed sets.
func (d *Daemon) expiryLoop(ctx context.Context) error {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	retry := time.Time{} // after a failed update, not before this
	for {
		d.mu.Lock()
		next := d.policy.NextExpiry()
		d.mu.Unlock()
		t.Stop()
		var timer <-chan time.Time
		if !next.IsZero() {
			t.Reset(max(time.Until(next), time.Until(retry), 0) + 10*time.Millisecond)
			timer = t.C
		}
		select {
		case <-ctx.Done():
			d.log.Info("stopping; the ruleset stays installed")
			return nil
		case <-d.wake:
		case <-timer:
			d.opMu.Lock()
			d.mu.Lock()
			before := d.policy
			p := d.policy.Active(time.Now())
			d.mu.Unlock()
			if !before.Equal(p) {
				if err := d.commit(p, "expired entries removed: "+describe(p)); err != nil {
					d.log.Error("expiry update failed; retrying in a second", "err", err)
					retry = time.Now().Add(time.Second)
				}
			}
			d.opMu.Unlock()
		}
	}
}

func (d *Daemon) applyAllow(p netpolicy.Policy) error {
	v4, v6 := netpolicy.AllowSets(p.Active(time.Now()))
	return d.withNft(func(c *firewall.Conn) error { return firewall.ReplaceAllow(c, v4, v6) })
}

func (d *Daemon) logChange(what string) {
	d.log.Info("policy change", "what", what)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.changes = append(d.changes, netdapi.Change{Time: time.Now().UTC(), What: what})
	if len(d.changes) > maxChanges {
		d.changes = d.changes[len(d.changes)-maxChanges:]
	}
}

func describe(p netpolicy.Policy) string {
	var cs, ds []string
	for _, c := range p.AllowEgress {
		cs = append(cs, c.Prefix.String())
	}
	for _, dm := range p.AllowDomains {
		ds = append(ds, dm.Pattern)
	}
	return fmt.Sprintf("allow_egress=%v allow_domains=%v", cs, ds)
}

func (d *Daemon) countDenial(dest string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if den, ok := d.denials[dest]; ok {
		den.Count++
		den.Last = time.Now().UTC()
		return
	}
	if len(d.denials) >= maxDenials {
		// Forget the oldest so a scan of many addresses cannot grow memory.
		var oldest string
		for k, v := range d.denials {
			if oldest == "" || v.Last.Before(d.denials[oldest].Last) {
				oldest = k
			}
		}
		delete(d.denials, oldest)
	}
	d.denials[dest] = &netdapi.Denial{Dest: dest, Count: 1, Last: time.Now().UTC()}
}

func (d *Daemon) packetDenied(pkt []byte) {
	// Multicast (IPv6 MLD reports the kernel sends on its own) is denied
	// too but is nothing the agent asked for; it would only hide the
	// denials a user is looking for.
	if dest, ok := netpolicy.ParsePacketDest(pkt); ok && !dest.Addr.IsMulticast() {
		d.report(netdapi.DenialEvent{Dest: dest.String(), NeverOpened: netpolicy.NeverOpened(dest.Addr, d.hostAddrs())})
	}
}

// serveControl answers control requests. The socket is reachable only by
// the host user (the sandbox never has the socket's directory mounted);
// the peer's uid is checked anyway.
func (d *Daemon) serveControl(ctx context.Context, l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() == nil {
				d.log.Error("control accept", "err", err)
			}
			return
		}
		go d.handleControl(ctx, c)
	}
}

func peerUID(c net.Conn) (int, error) {
	cred, err := unixsock.PeerCred(c)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}

func (d *Daemon) handleControl(ctx context.Context, c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	enc := json.NewEncoder(c)
	if uid, err := peerUID(c); err != nil || uid != os.Getuid() {
		d.log.Warn("control connection refused", "peer_uid", uid, "err", err)
		enc.Encode(netdapi.Response{Error: "permission denied"})
		return
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64*1024), netdapi.MaxMessage)
	if !sc.Scan() {
		return
	}
	var req netdapi.Request
	if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
		enc.Encode(netdapi.Response{Error: "bad request: " + err.Error()})
		return
	}
	resp := d.handle(ctx, req)
	enc.Encode(resp)
}

func (d *Daemon) handle(ctx context.Context, req netdapi.Request) netdapi.Response {
	if req.Version != netdapi.Version {
		return netdapi.Response{Error: fmt.Sprintf("protocol version %d, netd speaks %d", req.Version, netdapi.Version)}
	}
	if req.Reason == "" {
		req.Reason = "control socket"
	}
	// An unclaimed spare serves no sandbox: it answers its status (which
	// says so) and its claim, nothing else.
	if d.spare.Load() == spareWaiting && req.Op != netdapi.OpStatus && req.Op != netdapi.OpClaim {
		return netdapi.Response{Error: "an unclaimed spare sidecar: no sandbox runs behind it", Spare: true}
	}
	if resp, ok := d.handleDenialOps(ctx, req); ok {
		return resp
	}
	if resp, ok := d.handleSecretOps(ctx, req); ok {
		return resp
	}
	reason := req.Reason
	if req.Op != netdapi.OpStatus {
		d.opMu.Lock()
		defer d.opMu.Unlock()
	}
	switch req.Op {
	case netdapi.OpStatus:
	case netdapi.OpSetPolicy:
		if err := d.setPolicy(req.Policy, reason); err != nil {
			return netdapi.Response{Error: err.Error()}
		}
	case netdapi.OpAllow:
		if err := d.allow(req, reason); err != nil {
			return netdapi.Response{Error: err.Error()}
		}
	case netdapi.OpHostAddrs:
		if err := d.setHostAddrs(req.Addrs, reason); err != nil {
			return netdapi.Response{Error: err.Error()}
		}
	case netdapi.OpClaim:
		if err := d.claim(req); err != nil {
			return netdapi.Response{Error: err.Error()}
		}
	default:
		return netdapi.Response{Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
	st := d.status()
	return netdapi.Response{OK: true, Status: &st, Spare: d.spare.Load() == spareWaiting}
}

// setPolicy replaces the policy: the permanent entries by policy's, the
// temporary ones kept until they expire.
func (d *Daemon) setPolicy(policy *netpolicy.Policy, reason string) error {
	if policy == nil {
		return errors.New("set_policy without a policy")
	}
	if err := policy.Validate(); err != nil {
		return err
	}
	d.mu.Lock()
	// Temporary entries added with `net allow` survive a reload until
	// they expire; the permanent ones are replaced.
	p := *policy
	for _, c := range d.policy.AllowEgress {
		if !c.Expires.IsZero() {
			p.AllowEgress = append(p.AllowEgress, c)
		}
	}
	for _, dm := range d.policy.AllowDomains {
		if !dm.Expires.IsZero() {
			p.AllowDomains = append(p.AllowDomains, dm)
		}
	}
	p = p.Active(time.Now())
	d.mu.Unlock()
	return d.commit(p, reason+": set policy "+describe(p))
}

// allow adds req.Target to the policy, for req.ForSeconds when set.
func (d *Daemon) allow(req netdapi.Request, reason string) error {
	if req.ForSeconds < 0 {
		return errors.New("negative duration")
	}
	cidr, domain, err := netpolicy.ParseTarget(req.Target)
	if err != nil {
		return err
	}
	if domain == "" {
		// The ruleset refuses these whatever the policy says: saying
		// "allowed" would be untrue, and a user following a notice the
		// agent provoked must not be told otherwise.
		if why := netpolicy.NeverOpenedPrefix(cidr, d.hostAddrs()); why != "" {
			return fmt.Errorf("%s is %s: lazaret never opens it", req.Target, why)
		}
	}
	var exp time.Time
	if req.ForSeconds > 0 {
		exp = time.Now().Add(time.Duration(req.ForSeconds) * time.Second).UTC()
	}
	d.mu.Lock()
	p := d.policy
	p.AllowEgress = slices.Clone(p.AllowEgress)
	p.AllowDomains = slices.Clone(p.AllowDomains)
	what := reason + ": allow " + req.Target
	if domain != "" {
		p.AllowDomains = append(p.AllowDomains, netpolicy.Domain{Pattern: domain, Expires: exp})
	} else {
		p.AllowEgress = append(p.AllowEgress, netpolicy.CIDR{Prefix: cidr, Expires: exp})
	}
	p = p.Active(time.Now())
	d.mu.Unlock()
	if !exp.IsZero() {
		what += " until " + exp.Format(time.RFC3339)
	}
	return d.commit(p, what)
}

// commit installs p's allow sets (one transaction) and then makes p the
// daemon's policy.
func (d *Daemon) commit(p netpolicy.Policy, what string) error {
	if err := d.applyAllow(p); err != nil {
		return err
	}
	// Addresses learned from names the new policy no longer allows are
	// closed now rather than at the end of their TTL (established flows
	// stay up).
	active := p.Active(time.Now())
	var stale []netip.Addr
	d.mu.Lock()
	d.policy = p
	for a, r := range d.resolved {
		if !active.AllowsName(r.Name) {
			stale = append(stale, a)
			delete(d.resolved, a)
		}
	}
	d.mu.Unlock()
	if len(stale) > 0 {
		err := d.withNft(func(c *firewall.Conn) error { return firewall.RemoveResolved(c, stale) })
		if err != nil {
			d.log.Error("closing addresses of names no longer allowed", "err", err)
		} else {
			what += fmt.Sprintf("; closed %d resolved address(es)", len(stale))
		}
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
	d.logChange(what)
	return nil
}

func (d *Daemon) status() netdapi.Status {
	var counters map[string]uint64
	if d.nft != nil { // nil before Run, and in pod mode
		var err error
		d.nftMu.Lock()
		counters, err = firewall.Counters(d.nft)
		d.nftMu.Unlock()
		if err != nil {
			d.log.Warn("read counters", "err", err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	st := netdapi.Status{
		Applied: d.applied,
		Version: version.Version,
		// The installed policy: an entry past its expiry stays listed until
		// the expiry timer has removed it from the kernel.
		Policy:    d.policy,
		Counters:  counters,
		DenialLog: d.denialLog,
		Changes:   slices.Clone(d.changes),
		HostAddrs: d.filter.Host(),
		Grace:     int64(d.cfg.Grace / time.Second),
		Hold:      int64(d.holds.duration() / time.Second),
		Injecting: slices.Clone(d.injecting),
		Firewall:  "nftables",
	}
	if d.cfg.NoFirewall {
		st.Firewall = FirewallNone
	}
	if d.proxy != nil {
		st.Secrets = d.proxy.Stats()
	}
	for _, u := range d.cfg.Upstreams {
		st.Upstreams = append(st.Upstreams, u.String())
	}
	now := d.cfg.Now()
	for a, r := range d.resolved {
		if r.Expires.Before(now) {
			delete(d.resolved, a)
			continue
		}
		st.Resolved = append(st.Resolved, r)
	}
	sort.Slice(st.Resolved, func(i, j int) bool { return st.Resolved[i].Addr < st.Resolved[j].Addr })
	for _, den := range d.denials {
		st.Denials = append(st.Denials, *den)
	}
	sort.Slice(st.Denials, func(i, j int) bool {
		if st.Denials[i].Count != st.Denials[j].Count {
			return st.Denials[i].Count > st.Denials[j].Count
		}
		return st.Denials[i].Dest < st.Denials[j].Dest
	})
	return st
}

// resolve answers one query from the sandbox.
func (d *Daemon) resolve(ctx context.Context, msg []byte) []byte {
	q, err := parseQuery(msg)
	if err != nil {
		if q.id != 0 || len(msg) >= 12 {
			return reply(query{id: q.id}, dnsmessage.RCodeFormatError)
		}
		return nil
	}
	d.mu.Lock()
	p := d.policy.Active(time.Now())
	d.mu.Unlock()
	d.checkPlaceholderName(q.name)
	dec, why := decide(q, p)
	reported := false
	if dec == deny {
		var allowed bool
		if allowed, reported = d.held(ctx, q, why); allowed {
			d.mu.Lock()
			p = d.policy.Active(time.Now())
			d.mu.Unlock()
			dec, why = decide(q, p)
		}
	}
	switch dec {
	case deny:
		d.log.Info("dns denied", "name", q.name, "type", q.question.Type, "reason", why)
		if !reported {
			d.report(netdapi.DenialEvent{Dest: "dns " + q.name, Name: q.name, Reason: why})
		}
		return reply(q, dnsmessage.RCodeNameError)
	case noData:
		return reply(q, dnsmessage.RCodeSuccess)
	}
	if d.injectorFor(q.name) != nil {
		return d.injectorAnswer(q)
	}
	// A bounded number of upstream exchanges; a flood gets SERVFAIL
	// rather than piling up goroutines.
	select {
	case d.inflight <- struct{}{}:
		defer func() { <-d.inflight }()
	case <-time.After(2 * time.Second):
		return reply(q, dnsmessage.RCodeServerFailure)
	case <-ctx.Done():
		return reply(q, dnsmessage.RCodeServerFailure)
	}
	id, up, err := upstreamQuery(q)
	if err != nil {
		return reply(q, dnsmessage.RCodeServerFailure)
	}
	for _, u := range d.cfg.Upstreams {
		resp, err := exchange(ctx, u, id, up, !d.cfg.NoFirewall)
		if err != nil {
			d.log.Warn("upstream failed", "upstream", u, "name", q.name, "err", err)
			continue
		}
		out, ls, err := readAnswer(resp, id, q, d.cfg.MinTTL, d.cfg.MaxTTL)
		if err != nil {
			d.log.Warn("upstream answer refused", "upstream", u, "err", err)
			continue
		}
		// The addresses are allowed before the answer leaves, so the
		// agent's connect right after the lookup already passes.
		if _, err := d.allowResolved(q.name, ls); err != nil {
			d.log.Error("add resolved addresses", "name", q.name, "err", err)
			return reply(q, dnsmessage.RCodeServerFailure)
		}
		if d.cfg.NoFirewall {
			d.mu.Lock()
			f := d.filter
			d.mu.Unlock()
			if out, err = dropAddrs(out, f.Denied); err != nil {
				return reply(q, dnsmessage.RCodeServerFailure)
			}
		}
		return out
	}
	return reply(q, dnsmessage.RCodeServerFailure)
}

// allowResolved opens the addresses an answer for name carried, except
// those the learn filter refuses (special-purpose ranges, slirp's and the
// host's own addresses: a hostile or hijacked zone must not aim the
// sandbox at the host or its LAN). Each stays open for its TTL or the
// grace period, whichever is longer, renewed by every answer naming it.
func (d *Daemon) allowResolved(name string, all []learned) ([]firewall.Resolved, error) {
	rs := d.admit(name, all)
	if len(rs) == 0 {
		return nil, nil
	}
	err := d.withNft(func(c *firewall.Conn) error {
		err := firewall.AddResolved(c, rs)
		if err != nil {
			// An entry may have expired in the kernel between the check
			// and the batch; add without the refresh deletes.
			for i := range rs {
				rs[i].Refresh = false
			}
			err = firewall.AddResolved(c, rs)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	d.remember(name, rs)
	return rs, nil
}

// admit returns the set elements for the addresses of an answer that may
// be opened, with their timeouts; refused ones are logged and counted.
func (d *Daemon) admit(name string, all []learned) []firewall.Resolved {
	now := d.cfg.Now()
	var rs []firewall.Resolved
	var refused []netdapi.DenialEvent
	d.mu.Lock()
	for _, l := range all {
		if why := d.filter.Denied(l.addr); why != "" {
			never := netpolicy.NeverOpened(l.addr, d.filter.Host())
			if never == "" && cidrOpens(d.policy.Active(now), l.addr) {
				// allow_egress opens it: the agent reaches it by the
				// CIDR, so nothing is denied and no notice says so.
				continue
			}
			d.log.Warn("not opening an address learned from DNS", "name", name, "addr", l.addr, "reason", why)
			refused = append(refused, netdapi.DenialEvent{Dest: fmt.Sprintf("dns %s -> %s (%s)", name, l.addr, why),
				Name: name, Reason: "answer address refused", NeverOpened: never})
			continue
		}
		prev, ok := d.resolved[l.addr]
		rs = append(rs, firewall.Resolved{Addr: l.addr, TTL: max(l.ttl, d.cfg.Grace), Refresh: ok && prev.Expires.After(now)})
	}
	d.mu.Unlock()
	for _, ev := range refused {
		d.report(ev)
	}
	return rs
}

// cidrOpens reports whether one of p's CIDRs holds a (an IPv4-mapped
// address as its IPv4 form, as the ruleset matches it).
func cidrOpens(p netpolicy.Policy, a netip.Addr) bool {
	for _, c := range p.AllowEgress {
		if c.Prefix.Contains(a) || c.Prefix.Contains(a.Unmap()) {
			return true
		}
	}
	return false
}

// remember records addresses the kernel took, until their timeout.
func (d *Daemon) remember(name string, rs []firewall.Resolved) {
	now := d.cfg.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.resolved) >= netpolicy.MaxResolved {
		for a, r := range d.resolved {
			if r.Expires.Before(now) {
				delete(d.resolved, a)
			}
		}
	}
	for _, r := range rs {
		d.resolved[r.Addr] = netdapi.Resolved{Name: name, Addr: r.Addr.String(), Expires: now.Add(r.TTL).UTC()}
	}
}

// hostAddrs are the host's own addresses as last told.
func (d *Daemon) hostAddrs() []netip.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.filter.Host()
}

// setHostAddrs replaces the host addresses the learn filter refuses and
// the ruleset's host sets, and closes resolved addresses that are now the
// host's.
func (d *Daemon) setHostAddrs(addrs []netip.Addr, reason string) error {
	f := netpolicy.NewLearnFilter(addrs)
	if err := d.withNft(func(c *firewall.Conn) error { return firewall.ReplaceHost(c, f.Host()) }); err != nil {
		return fmt.Errorf("updating the host's addresses in the ruleset: %w", err)
	}
	var stale []netip.Addr
	d.mu.Lock()
	d.filter = f
	for a := range d.resolved {
		if f.Denied(a) != "" {
			stale = append(stale, a)
			delete(d.resolved, a)
		}
	}
	d.mu.Unlock()
	what := fmt.Sprintf("%s: host addresses %v", reason, f.Host())
	if len(stale) > 0 {
		err := d.withNft(func(c *firewall.Conn) error { return firewall.RemoveResolved(c, stale) })
		if err != nil {
			return fmt.Errorf("closing resolved addresses of the host: %w", err)
		}
		what += fmt.Sprintf("; closed %v", stale)
	}
	d.logChange(what)
	return nil
}

func (d *Daemon) serveUDP(ctx context.Context, c *net.UDPConn) {
	buf := make([]byte, 4096)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		msg := slices.Clone(buf[:n])
		go func() {
			if out := d.resolve(ctx, msg); out != nil {
				c.WriteToUDPAddrPort(out, from)
			}
		}()
	}
}

func (d *Daemon) serveTCP(ctx context.Context, l *net.TCPListener) {
	conns := make(chan struct{}, 32) // concurrent TCP clients
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		select {
		case conns <- struct{}{}:
		default:
			c.Close()
			continue
		}
		go func() {
			defer func() { <-conns }()
			defer c.Close()
			for range 16 {
				c.SetDeadline(time.Now().Add(10 * time.Second))
				msg, err := readFramed(c)
				if err != nil {
					return
				}
				out := d.resolve(ctx, msg)
				if out == nil {
					return
				}
				framed := append([]byte{byte(len(out) >> 8), byte(len(out))}, out...)
				if _, err := c.Write(framed); err != nil {
					return
				}
			}
		}()
	}
}
