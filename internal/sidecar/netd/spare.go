package netd

// A spare netd waits, deny-all and without an uplink, for the domain's next
// start to claim it, and exits when it expires (docs/LIFECYCLE.md).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

type spareState = int32

const (
	notSpare spareState = iota
	spareWaiting
	spareClaimed
	spareExpired
)

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
