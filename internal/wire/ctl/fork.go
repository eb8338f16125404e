package ctl

import "context"

// TypeForkState asks a running sandbox's coordinator to copy its
// persistent dirs into an attempt (`lazaret fork` of a running sandbox):
// the sandbox is paused for the copy, so the attempt gets one instant of
// it (client → coordinator; a ForkStateRequest answered by a ForkState).
const TypeForkState = "stateanchor.fork"

// ForkStateRequest names the attempt (of the coordinator's own profile and
// workspace) whose Domain Root receives the copy; the CLI made its root
// and holds its domain lock.
type ForkStateRequest struct {
	Attempt string `json:"attempt"`
}

// ForkState is how the copy went.
type ForkState struct {
	Mode   string   `json:"mode,omitempty"` // "reflink", "copy", "" (nothing to copy)
	Bytes  int64    `json:"bytes"`
	Layers []string `json:"layers,omitempty"`
	// Paused says whether the sandbox was paused for the copy (false when
	// its processes could not be reached: limits = "best-effort").
	Paused bool `json:"paused"`
	// PausedMillis is how long the agent was paused.
	PausedMillis int64 `json:"paused_ms"`
}

// ForkState asks for the copy of the sandbox's persistent dirs into
// attempt req.Attempt.
func (c *Client) ForkState(ctx context.Context, req ForkStateRequest) (ForkState, error) {
	var st ForkState
	err := c.call(ctx, TypeForkState, req, &st)
	return st, err
}
