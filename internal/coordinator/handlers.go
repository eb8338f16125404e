package coordinator

import (
	"context"
	"maps"
	"os"
	"time"

	"github.com/lazaret-dev/lazaret/internal/coordinator/sandbox"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/version"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

func (c *coordinator) handleStatus(ctx context.Context, _ *ctlserver.Request) (any, error) {
	a := c.o.Anchor
	st := &ctl.Status{
		Domain: a.Hash, Profile: a.Profile, Workspace: a.Workspace, DataRoot: a.DataRoot,
		PID: os.Getpid(), Version: version.Version, Started: c.started,
		Uptime:   ctl.Duration(time.Since(c.started)),
		Sessions: []ctl.SessionStatus{}, Components: []string{},
	}
	for _, comp := range c.comps {
		st.Components = append(st.Components, comp.Name())
		if r, ok := comp.(LimitsReporter); ok {
			st.Limits = r.Status()
		}
	}
	c.mu.Lock()
	st.ShuttingDown, st.Reason = c.shuttingDown, c.reason
	c.mu.Unlock()
	for _, s := range c.srv.Sessions() {
		st.Sessions = append(st.Sessions, c.sessionStatus(s))
	}
	select {
	case <-c.ready:
	default:
		st.Container.State = "starting"
		return st, nil
	}
	if c.spec != nil {
		st.Container.Name, st.Container.Image, st.Container.Runtime = c.spec.Name, c.spec.Image, c.pm.Runtime
	}
	st.Container.ID = c.containerID
	if c.containerID == "" {
		st.Container.State = "not running"
		return st, nil
	}
	if l := st.Limits; l != nil && (l.Paused || (l.Memory != nil && l.Memory.Stopped)) {
		// podman inspect asks runsc for the state, which waits on the
		// stopped Sentry: answer without it.
		st.Container.State = "paused by a resource limit"
		return st, nil
	}
	if info, err := c.pm.InspectContainer(ctx, c.containerID); err != nil {
		st.Container.State = "unknown: " + err.Error()
	} else {
		st.Container.State = info.State.Status
	}
	return st, nil
}

// stopReason is the teardown reason of a stop request: a `lazaret stop`,
// or the human's Q at an escalation prompt. An unknown cause is refused.
func stopReason(r *ctlserver.Request) (string, error) {
	var sr ctl.StopRequest
	if err := r.Decode(&sr); err != nil {
		return "", err
	}
	switch sr.Cause {
	case "":
		return ReasonStopped, nil
	case ctl.StopCauseEscalationAbort:
		return ReasonAborted, nil
	}
	return "", ctl.Errorf(ctl.ErrBadRequest.Code, "stop: unknown cause %q", sr.Cause)
}

func (c *coordinator) handleStop(ctx context.Context, r *ctlserver.Request) (any, error) {
	reason, err := stopReason(r)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	late := c.stopClosed
	if !late {
		c.stopWG.Add(1)
	}
	// A stop leaves nothing running, even when it comes while a sandbox
	// whose last session left is being torn down.
	c.stopAsked = true
	if c.cancelSpare != nil {
		c.cancelSpare()
	}
	c.mu.Unlock()
	if late {
		return struct{}{}, nil // already torn down
	}
	defer c.stopWG.Done()
	c.shutdown(reason, false)
	c.poke()
	select {
	case <-c.torndown:
		return struct{}{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *coordinator) handleExecSpec(ctx context.Context, r *ctlserver.Request) (any, error) {
	if r.Session == nil {
		return nil, ctl.Errorf(ctl.ErrNoSession.Code, "exec_spec needs an attached session")
	}
	var req ctl.ExecSpecRequest
	if err := r.Decode(&req); err != nil {
		return nil, err
	}
	req.SessionID = r.Session.ID
	// A session attached before a component died must not start new
	// commands in the sandbox that is being stopped.
	c.mu.Lock()
	down, reason, id := c.shuttingDown, c.reason, c.containerID
	c.mu.Unlock()
	if down {
		return nil, ctl.Errorf(ctl.ErrShuttingDown.Code, "the sandbox is shutting down: %s", reason)
	}
	env := map[string]string{"LAZARET_SESSION_ID": r.Session.ID}
	for _, comp := range c.comps {
		if e, ok := comp.(ExecEnver); ok {
			extra, err := e.ExecEnv(ctx, r.Session, &req)
			if err != nil {
				return nil, err
			}
			maps.Copy(env, extra)
		}
	}
	return &ctl.ExecSpec{Container: c.spec.Name, ContainerID: id, Env: env, Workdir: sandbox.WorkspaceDir}, nil
}

// handleGitSync runs one ref sync of every component that has one and
// answers when it is done (the caller bounds the wait).
func (c *coordinator) handleGitSync(ctx context.Context, _ *ctlserver.Request) (any, error) {
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for _, comp := range c.comps {
		if s, ok := comp.(Syncer); ok {
			if err := s.SyncNow(ctx); err != nil {
				return nil, ctl.Errorf(ctl.ErrInternal.Code, "%s: %v", comp.Name(), err)
			}
		}
	}
	return struct{}{}, nil
}
