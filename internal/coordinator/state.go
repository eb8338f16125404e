package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/store"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// The coordinator owns the domain's state store for its whole life (DESIGN
// §11): it opens it when the sandbox starts, serves audit queries from
// other processes on the control socket, writes sandbox.start/stop and
// session.start/end, hands the escalation component its audit sink, and
// closes it at teardown before the control socket goes away.

// stateOpenTimeout bounds the wait for the store's lock at start: a
// `lazaret audit` without a coordinator holds it for a moment only.
const stateOpenTimeout = 10 * time.Second

// stateWriteTimeout bounds one lifecycle audit write.
const stateWriteTimeout = 10 * time.Second

// errNoState answers audit requests before the store is open (or after
// it closed).
var errNoState = ctl.Errorf(ctl.ErrShuttingDown.Code, "the state store is not open")

// state is the coordinator's handle on the store, and the ordered queue of
// lifecycle entries written from hooks that must not wait for a disk
// (the control socket's Attached and Detached run under its lock).
type state struct {
	mu     sync.RWMutex
	st     *store.Store
	events chan audit.Entry
	done   chan struct{}
	open   map[string]*ctlserver.Session // attached sessions, for session.end at teardown
}

func (c *coordinator) store() *store.Store {
	c.state.mu.RLock()
	defer c.state.mu.RUnlock()
	return c.state.st
}

// openState opens the store and starts the lifecycle writer.
func (c *coordinator) openState(ctx context.Context) error {
	// Check: a damaged file is moved aside before anything writes to
	// it (about 45 ms for 100,000 entries; docs/PERFORMANCE.md).
	st, err := store.Open(ctx, c.o.Anchor.StateDB(), store.Options{Role: "coordinator", Timeout: stateOpenTimeout, Log: c.log, Check: true})
	if err != nil {
		return fmt.Errorf("state store: %w", err)
	}
	if rec := st.Recovered(); rec != nil {
		c.log.Warn("state store recovered", "err", rec)
	}
	c.state.mu.Lock()
	c.state.st = st
	c.state.events = make(chan audit.Entry, 1024)
	c.state.done = make(chan struct{})
	c.state.open = map[string]*ctlserver.Session{}
	c.state.mu.Unlock()
	go func() {
		defer close(c.state.done)
		for e := range c.state.events {
			c.writeAudit(e)
		}
	}()
	return nil
}

// appendAudit is the escalation component's audit sink.
func (c *coordinator) appendAudit(ctx context.Context, e audit.Entry) (uint64, error) {
	st := c.store()
	if st == nil {
		return 0, errNoState
	}
	return st.AppendAudit(ctx, e)
}

func (c *coordinator) writeAudit(e audit.Entry) {
	ctx, cancel := context.WithTimeout(context.Background(), stateWriteTimeout)
	defer cancel()
	if _, err := c.appendAudit(ctx, e); err != nil {
		c.log.Error("audit", "kind", e.Kind, "err", err)
	}
}

// queueAudit hands e to the lifecycle writer without waiting for the disk,
// and keeps the set of open sessions in step.
func (c *coordinator) queueAudit(e audit.Entry, s *ctlserver.Session) {
	e.Time = time.Now()
	c.state.mu.Lock()
	defer c.state.mu.Unlock()
	if c.state.events == nil {
		return
	}
	switch e.Kind {
	case audit.KindSessionStart:
		c.state.open[s.ID] = s
	case audit.KindSessionEnd:
		delete(c.state.open, s.ID)
	}
	select {
	case c.state.events <- e:
	default:
		c.log.Error("audit queue full: entry lost", "kind", e.Kind, "session", e.Session)
	}
}

// auditStarted records the outcome of the sandbox start.
func (c *coordinator) auditStarted(startErr error) {
	if c.store() == nil {
		return
	}
	a := c.o.Anchor
	if startErr != nil {
		c.writeAudit(audit.Entry{Time: time.Now(), Kind: audit.KindSandboxStop, Profile: a.Profile,
			Fields: map[string]string{"reason": "start failed: " + startErr.Error(), "domain": a.Hash}})
		return
	}
	f := map[string]string{"domain": a.Hash, "workspace": a.Workspace, "container": c.spec.Name, "id": c.containerID,
		"image": c.o.Profile.Image, "coordinator_pid": strconv.Itoa(os.Getpid())}
	if rec := c.store().Recovered(); rec != nil {
		f["state_store_recovered"] = rec.MovedTo
	}
	comps := make([]string, 0, len(c.comps))
	for _, comp := range c.comps {
		comps = append(comps, comp.Name())
	}
	f["components"] = strings.Join(comps, ",")
	c.writeAudit(audit.Entry{Time: time.Now(), Kind: audit.KindSandboxStart, Profile: a.Profile, Fields: f})
}

func (c *coordinator) sessionAttached(s *ctlserver.Session) {
	c.events.Publish(ctl.Event{Kind: ctl.EventSessionStarted, Session: s.ID})
	if c.store() == nil {
		return
	}
	c.queueAudit(audit.Entry{Kind: audit.KindSessionStart, Profile: c.o.Anchor.Profile, Session: s.ID,
		Fields: map[string]string{"pid": strconv.Itoa(s.PeerPID), "tty": strconv.FormatBool(s.TTY), "command": strings.Join(s.Command, " ")}}, s)
}

func (c *coordinator) sessionDetached(s *ctlserver.Session) {
	c.events.Publish(ctl.Event{Kind: ctl.EventSessionEnded, Session: s.ID})
	c.mu.Lock()
	delete(c.kept, s.ID)
	c.mu.Unlock()
	if c.store() == nil {
		return
	}
	now := time.Now()
	c.queueAudit(c.sessionEnd(s, now, "detached"), s)
	if st := c.store(); st != nil {
		// Recorded off the socket's lock; the exit code is the CLI's to
		// know, so it is recorded as not reported.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), stateWriteTimeout)
			defer cancel()
			err := st.RecordSession(ctx, store.Session{ID: s.ID, Profile: c.o.Anchor.Profile, Start: s.Attached, End: now, Exit: store.ExitNotReported})
			if err != nil && !errors.Is(err, store.ErrClosed) {
				c.log.Error("record session", "session", s.ID, "err", err)
			}
		}()
	}
}

func (c *coordinator) sessionEnd(s *ctlserver.Session, now time.Time, reason string) audit.Entry {
	return audit.Entry{Time: now, Kind: audit.KindSessionEnd, Profile: c.o.Anchor.Profile, Session: s.ID,
		Fields: map[string]string{"duration": now.Sub(s.Attached).Round(time.Millisecond).String(), "reason": reason}}
}

// closeState writes session.end for the sessions still attached and
// sandbox.stop after every queued entry, and closes the
// store, releasing its lock for `lazaret audit` and the next coordinator.
func (c *coordinator) closeState(reason string) {
	c.state.mu.Lock()
	st, events, open := c.state.st, c.state.events, c.state.open
	c.state.events, c.state.open = nil, nil
	c.state.mu.Unlock()
	if st == nil {
		return
	}
	close(events)
	<-c.state.done
	for _, s := range open {
		c.writeAudit(c.sessionEnd(s, time.Now(), "sandbox stopped: "+reason))
	}
	if c.startErr == nil {
		c.writeAudit(audit.Entry{Time: time.Now(), Kind: audit.KindSandboxStop, Profile: c.o.Anchor.Profile,
			Fields: map[string]string{"reason": reason, "domain": c.o.Anchor.Hash}})
	}
	c.state.mu.Lock()
	c.state.st = nil
	c.state.mu.Unlock()
	if err := st.Close(); err != nil {
		c.log.Error("closing the state store", "err", err)
	}
}

// auditStore serves the control socket's audit requests from whichever
// store is open.
type auditStore struct{ c *coordinator }

func (a auditStore) AuditJSON(ctx context.Context, f audit.Filter) ([]json.RawMessage, error) {
	st := a.c.store()
	if st == nil {
		return nil, errNoState
	}
	return st.AuditJSON(ctx, f)
}

// AppendAudit records an entry a CLI sent (policy.change), stamped with
// this domain's profile.
func (a auditStore) AppendAudit(ctx context.Context, e audit.Entry) (uint64, error) {
	e.Profile = a.c.o.Anchor.Profile
	return a.c.appendAudit(ctx, e)
}

func (a auditStore) Verify(ctx context.Context) (audit.Report, error) {
	st := a.c.store()
	if st == nil {
		return audit.Report{}, errNoState
	}
	return st.Verify(ctx)
}
