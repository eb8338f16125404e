package coordinator

import (
	"context"
	"errors"
	"fmt"
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
	Freeze(ctx context.Context) (thaw func(), err error)
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
	// Planned and checked before the pause, measured after it: the agent
	// waits only for the copy.
	f, err := statestore.PrepareFork(ctx, c.pm, *src, statestore.Store{Root: statestore.DomainRoot(dst), DataRoot: dst.DataRoot})
	if err != nil {
		return nil, ctl.Errorf(ctl.ErrInternal.Code, "fork: %v", err)
	}
	st := ctl.ForkState{}
	if err := c.copyPaused(ctx, f, fr, req.Attempt, &st); err != nil {
		return nil, ctl.Errorf(ctl.ErrInternal.Code, "fork: %v", err)
	}
	res, err := f.Finish(ctx)
	if err != nil {
		return nil, ctl.Errorf(ctl.ErrInternal.Code, "fork: %v", err)
	}
	st.Mode, st.Bytes, st.Layers = res.Mode, res.Bytes, res.Layers
	c.log.Info("forked the persistent dirs", "attempt", req.Attempt, "mode", res.Mode, "bytes", res.Bytes, "paused_ms", st.PausedMillis)
	return &st, nil
}

// copyPaused runs the fork's copy with the sandbox paused (fr), or
// running when its processes cannot be reached (limits = "best-effort").
func (c *coordinator) copyPaused(ctx context.Context, f *statestore.PreparedFork, fr freezer, name string, st *ctl.ForkState) error {
	if fr != nil {
		began := time.Now()
		thaw, err := fr.Freeze(ctx)
		switch {
		case err == nil:
			st.Paused = true
			err := f.Copy(ctx)
			thaw()
			st.PausedMillis = time.Since(began).Milliseconds()
			return err
		case errors.Is(err, limits.ErrNotWatched):
			c.log.Warn("fork: the sandbox cannot be paused; its persistent dirs are copied while it runs", "attempt", name)
		default:
			f.Abort(ctx)
			return fmt.Errorf("pausing the sandbox: %w", err)
		}
	}
	return f.Copy(ctx)
}
