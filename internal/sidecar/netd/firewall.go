package netd

// The firewall side of the daemon: the ruleset installed through
// internal/sidecar/firewall, allowances that expire, and the denied
// packets nflog reports.

import (
	"context"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/sidecar/firewall"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

const (
	maxDenials = 512
	maxChanges = 100
)

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
