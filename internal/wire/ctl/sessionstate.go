package ctl

import "context"

// SessionState reports the attached session's kept state to its
// coordinator (TypeSessionState): a kept session's CLI sends it once after
// connecting and again whenever its keeper says a terminal attached,
// detached or the agent asked for attention.
func (c *Client) SessionState(ctx context.Context, st SessionState) error {
	return c.call(ctx, TypeSessionState, st, nil)
}
