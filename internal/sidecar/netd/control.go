package netd

// The control socket: the coordinator's and the CLI's requests (claim,
// policy changes, status), each checked against the peer's uid.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/sidecar/firewall"
	"github.com/lazaret-dev/lazaret/internal/unixsock"
	"github.com/lazaret-dev/lazaret/internal/version"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

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
