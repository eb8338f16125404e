package coordinator

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/events"
	"github.com/lazaret-dev/lazaret/internal/engine/notify"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// setUpEvents makes the sandbox's event stream and its pending approvals
// and registers their control requests. The notifiers
// (internal/coordinator/notify) subscribe to c.events.
func (c *coordinator) setUpEvents() {
	a := c.o.Anchor
	c.events = events.New(a.Profile, a.Workspace)
	if n := c.o.Config.Notify; n.Any() {
		// Stopped at the end of teardown (sandbox.stopped is queued by
		// then), waiting a bounded while for what is being sent.
		c.stopNotify = notify.Start(context.Background(), n, c.events, c.log)
	}
	c.approvals = approvals.New(c.events, c.o.Config.Escalation.AnswerFrom)
	c.kept = map[string]ctl.SessionState{}
	for typ, h := range c.approvals.Handlers(a.Profile, a.Workspace) {
		c.srv.Handle(typ, h)
	}
	c.srv.Handle(ctl.TypeEventsSubscribe, c.handleEventsSubscribe)
	c.srv.Handle(ctl.TypeSessionState, c.handleSessionState)
}

// handleEventsSubscribe streams the events after Since on the request's
// connection, each as a TypeEvent request, the next after its reply, so
// that they arrive in order. A subscriber that falls behind is dropped
// (its connection closed); the stream ends with the sandbox.
func (c *coordinator) handleEventsSubscribe(_ context.Context, r *ctlserver.Request) (any, error) {
	var req ctl.EventsSubscribe
	if err := r.Decode(&req); err != nil {
		return nil, err
	}
	c.events.Stream(r.Conn, req.Since, nil)
	return struct{}{}, nil
}

// handleSessionState records a kept session's terminal state (its CLI
// reports what its keeper sees) and publishes what changed.
func (c *coordinator) handleSessionState(_ context.Context, r *ctlserver.Request) (any, error) {
	if r.Session == nil {
		return nil, ctl.Errorf(ctl.ErrNoSession.Code, "%s needs an attached session", ctl.TypeSessionState)
	}
	var st ctl.SessionState
	if err := r.Decode(&st); err != nil {
		return nil, err
	}
	// The server's lock before c.mu, never inside it (attached holds the
	// server's and takes c.mu).
	current := c.srv.Session(r.Session.ID) == r.Session
	c.mu.Lock()
	old, known := c.kept[r.Session.ID]
	if current {
		c.kept[r.Session.ID] = ctl.SessionState{Kept: st.Kept, Attached: st.Attached}
	}
	c.mu.Unlock()
	if st.Kept && (!known || old.Attached != st.Attached) {
		kind := ctl.EventSessionDetached
		if st.Attached {
			kind = ctl.EventSessionAttached
		}
		if known || !st.Attached {
			c.events.Publish(ctl.Event{Kind: kind, Session: r.Session.ID})
		}
	}
	if st.Attention {
		c.events.Publish(ctl.Event{Kind: ctl.EventAgentAttention, Session: r.Session.ID})
	}
	return struct{}{}, nil
}

// sessionStatus is s as `status` lists it: with its kept state and the
// ids of its pending requests.
func (c *coordinator) sessionStatus(s *ctlserver.Session) ctl.SessionStatus {
	ss := ctl.SessionStatus{SessionInfo: s.SessionInfo, PeerPID: s.PeerPID, Attached: s.Attached}
	c.mu.Lock()
	st, ok := c.kept[s.ID]
	c.mu.Unlock()
	if ok && st.Kept {
		ss.Kept, ss.Detached = true, !st.Attached
	}
	ss.Pending = c.approvals.PendingOf(s.ID)
	return ss
}
