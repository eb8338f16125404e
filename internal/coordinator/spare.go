package coordinator

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/netns"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
)

// spareEnv controls the spare network sidecar a sandbox leaves for the
// domain's next start (docs/LIFECYCLE.md): "off" leaves none; a duration
// is how long an unclaimed spare waits before it exits.
const spareEnv = "LAZARET_SPARE_SIDECAR"

// DefaultSpareExpiry is how long a spare waits when spareEnv is unset.
const DefaultSpareExpiry = 30 * time.Minute

// spareExpiry reads spareEnv.
func spareExpiry() (time.Duration, error) {
	v := os.Getenv(spareEnv)
	switch v {
	case "":
		return DefaultSpareExpiry, nil
	case "off":
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: give off or a duration such as 30m", spareEnv, v)
	}
	return d, nil
}

// leavesSpare reports whether a sandbox ending for reason leaves a spare:
// only one that started and ended because nobody uses it any more. A
// stop (`lazaret stop`, a signal, a failure) leaves nothing running.
func (c *coordinator) leavesSpare(reason string) bool {
	return c.spareExpiry > 0 && c.startErr == nil && c.containerID != "" &&
		(reason == ReasonLastDetach || reason == ReasonIdle)
}

// handOverToSpare tells each SpareStarter, before the Closes, that a
// spare will follow, so that Close leaves what the spare replaces.
// leaveSpare then either completes the spare or removes what was left.
func (c *coordinator) handOverToSpare(reason string) {
	c.mu.Lock()
	stopped := c.stopAsked
	c.mu.Unlock()
	if stopped || !c.leavesSpare(reason) {
		return
	}
	for _, comp := range c.comps[:c.prepared] {
		if s, ok := comp.(SpareStarter); ok {
			s.HandOverToSpare()
		}
	}
	c.handedOver = true
}

// leaveSpare gives each SpareStarter its turn at teardown, after every
// Close and while the control socket still answers (no start of this
// domain can begin before the spare is complete or removed). A stop
// request before or during it leaves none: it cancels the start, and what
// the Close handed over, or a spare found complete, is removed; so is
// what a failed start left.
func (c *coordinator) leaveSpare(reason string) {
	if !c.leavesSpare(reason) {
		return
	}
	for _, comp := range c.comps[:c.prepared] {
		s, ok := comp.(SpareStarter)
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
		c.mu.Lock()
		stopped := c.stopAsked
		c.cancelSpare = cancel
		c.mu.Unlock()
		var err error
		started, start := !stopped, time.Now()
		if started {
			err = s.StartSpare(ctx)
		}
		c.mu.Lock()
		stopped, c.cancelSpare = c.stopAsked, nil
		c.mu.Unlock()
		cancel()
		switch {
		case stopped && (started || c.handedOver):
			c.removeSpare(comp.Name(), s, "removing the spare after a stop")
		case stopped:
		case err != nil:
			// StartSpare removed what it made, and what Close left.
			c.log.Warn("no spare left for the next start", "component", comp.Name(), "err", err)
		default:
			c.log.Info("spare left for the next start", "component", comp.Name(), "took", time.Since(start).Round(time.Millisecond))
		}
	}
}

// sweepEndedSpares removes what other domains' spares left when they
// expired unclaimed (sidecar.SweepEndedSpares): their namespace pins
// would otherwise keep empty namespaces alive in podman's until those
// domains start again, which may be never. At teardown, off every
// start's path; it finds nothing to do most of the time.
func (c *coordinator) sweepEndedSpares() {
	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	defer cancel()
	start := time.Now()
	if n := sidecar.SweepEndedSpares(ctx, c.o.Anchor.RuntimeDir, c.o.Anchor.Hash, netns.New(c.pm), c.log); n > 0 {
		c.log.Info("swept ended spares of other domains", "count", n, "took", time.Since(start).Round(time.Millisecond))
	}
}

func (c *coordinator) removeSpare(name string, s SpareStarter, what string) {
	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	defer cancel()
	if err := s.RemoveSpare(ctx); err != nil {
		c.log.Error(what, "component", name, "err", err)
	}
}
