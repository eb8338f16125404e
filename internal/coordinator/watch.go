package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/procwatch"
)

// ReasonContainerExited is the teardown reason when the agent container
// ended on its own (killed, removed with podman, runsc crashed).
const ReasonContainerExited = "the sandbox container exited"

// watchInterval is how often the coordinator checks that the container's
// process still lives: one stat of /proc, no podman process per check.
const watchInterval = time.Second

// watchDelay is how long after the start the watch begins.
const watchDelay = time.Second

// watchContainer tears the sandbox down when the agent container's
// process ends, so that its sessions are told at once and the next
// lazaret gets a fresh sandbox instead of "container state improper". It
// finds the process with one inspect, after the start (off the start
// path), and identifies it by pid and start time, so a reused pid is not
// mistaken for it.
func (c *coordinator) watchContainer(ctx context.Context) {
	// The inspect waits a moment: right after the start, the first
	// session's podman exec is running and should have the CPU.
	select {
	case <-ctx.Done():
		return
	case <-c.torndown:
		return
	case <-time.After(watchDelay):
	}
	info, err := c.pm.InspectContainer(ctx, c.containerID)
	switch {
	case errors.Is(err, podman.ErrNoSuchContainer) || (err == nil && !info.State.Running):
		c.containerExited()
		return
	case err != nil || info.State.Pid <= 0:
		c.log.Warn("cannot watch the container", "err", err)
		return
	}
	p, err := procwatch.Find(info.State.Pid)
	if err != nil {
		c.containerExited()
		return
	}
	wctx, cancel := c.untilTorndown(ctx)
	defer cancel()
	if p.Wait(wctx, watchInterval) == nil {
		c.containerExited()
	}
}

func (c *coordinator) containerExited() {
	c.log.Warn("the container is gone", "id", c.containerID)
	if c.shutdown(ReasonContainerExited, false) {
		c.poke()
	}
}

// untilTorndown is ctx, also cancelled when the teardown has finished.
func (c *coordinator) untilTorndown(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-c.torndown:
			cancel()
		case <-wctx.Done():
		}
	}()
	return wctx, cancel
}

// Watcher is implemented by a component that runs processes of its own
// beside the container (the network sidecar and its uplink). Watch
// returns nil when ctx ends, or an error saying what died; the component
// has by then made the failure safe (the sidecar cuts the namespace off).
type Watcher interface {
	Watch(ctx context.Context) error
}

// watchComponents watches every Watcher component. A dead component stops
// the sandbox: a sandbox without its sidecar has neither a resolver nor
// anyone expiring temporary allowances, so restarting netd would have to
// restore state that died with it; stopping is simpler, and visible. The
// sessions are told why (teardown broadcasts the reason), new sessions and
// commands are refused while the teardown runs, and the audit trail
// records the failure as the sandbox.stop reason.
func (c *coordinator) watchComponents(ctx context.Context) {
	for _, comp := range c.comps[:c.prepared] {
		w, ok := comp.(Watcher)
		if !ok {
			continue
		}
		go func() {
			wctx, cancel := c.untilTorndown(ctx)
			defer cancel()
			// As for the container: the first session's exec goes first.
			select {
			case <-wctx.Done():
				return
			case <-time.After(watchDelay):
			}
			err := w.Watch(wctx)
			if err == nil || wctx.Err() != nil {
				return
			}
			c.componentFailed(comp.Name(), err)
		}()
	}
}

// componentFailed stops the sandbox because a component died. The
// reason reaches every attached session (one line) and the audit trail
// (the sandbox.stop entry and each session.end carry it).
func (c *coordinator) componentFailed(name string, err error) {
	reason := ReasonComponentFailed(name, err)
	var r StopReasoner
	if errors.As(err, &r) {
		reason = r.StopReason()
	}
	c.log.Error("component failed; stopping the sandbox", "component", name, "err", err)
	if c.shutdown(reason, false) {
		c.poke()
	}
}

// ReasonComponentFailed is the teardown reason when a component died.
func ReasonComponentFailed(name string, err error) string {
	return "component " + name + " failed: " + err.Error() + "; the sandbox was stopped"
}
