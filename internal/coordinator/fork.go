package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/lazaret-dev/lazaret/internal/coordinator/limits"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// forkSourcer is the State Anchor component: what a fork copies.
type forkSourcer interface {
	ForkSource() statestore.ForkSource
}

// freezer pauses the sandbox for a copy that must see one instant.
type freezer interface {
	Freeze() (thaw func(), err error)
}

// handleForkState copies the running sandbox's persistent dirs into an
// attempt (ctl.TypeForkState), the sandbox paused meanwhile, so that a
// package half-installed by the agent is in the attempt as it is at one
// instant, not torn between two.
func (c *coordinator) handleForkState(ctx context.Context, r *ctlserver.Request) (any, error) {
	var req ctl.ForkStateRequest
	if err := r.Decode(&req); err != nil {
		return nil, err
	}
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c.startErr != nil {
		return nil, ctl.Errorf(ctl.ErrInternal.Code, "fork: the sandbox did not start: %v", c.startErr)
	}
	dst, err := c.o.Anchor.ForAttempt(req.Attempt)
	if err != nil {
		return nil, ctl.Errorf(ctl.ErrBadRequest.Code, "fork: %v", err)
	}
	var src *statestore.ForkSource
	var fr freezer
	for _, comp := range c.comps {
		if s, ok := comp.(forkSourcer); ok {
			fs := s.ForkSource()
			src = &fs
		}
		if f, ok := comp.(freezer); ok {
			fr = f
		}
	}
	if src == nil || len(src.Dirs) == 0 {
		return &ctl.ForkState{}, nil
	}
	st := ctl.ForkState{}
	began := time.Now()
	if fr != nil {
		thaw, err := fr.Freeze()
		switch {
		case err == nil:
			st.Paused = true
			defer thaw()
		case errors.Is(err, limits.ErrNotWatched):
			c.log.Warn("fork: the sandbox cannot be paused; its persistent dirs are copied while it runs", "attempt", req.Attempt)
		default:
			return nil, ctl.Errorf(ctl.ErrInternal.Code, "fork: pausing the sandbox: %v", err)
		}
	}
	res, err := statestore.Fork(ctx, c.pm, *src, statestore.Store{Root: statestore.DomainRoot(dst), DataRoot: dst.DataRoot})
	if st.Paused {
		st.PausedMillis = time.Since(began).Milliseconds()
	}
	if err != nil {
		return nil, ctl.Errorf(ctl.ErrInternal.Code, "fork: %v", err)
	}
	st.Mode, st.Bytes, st.Layers = res.Mode, res.Bytes, res.Layers
	c.log.Info("forked the persistent dirs", "attempt", req.Attempt, "mode", res.Mode, "bytes", res.Bytes, "paused_ms", st.PausedMillis)
	return &st, nil
}
