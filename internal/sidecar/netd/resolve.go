package netd

// The DNS side of the daemon: each query from the sandbox answered for an
// allowed name only, the answer's addresses admitted to the allow sets.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/sidecar/firewall"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

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
