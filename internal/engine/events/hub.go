// Package events is a sandbox's event stream, held by its coordinator
// (local) or by each lazaret-kube session process: every event of the
// sandbox (ctl.Event) gets the next sequence number and goes to every
// subscriber (`lazaret events`, the notifiers). The last Keep events are
// kept, so that a subscriber can start from a sequence number it saw.
package events

import (
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// Keep is how many past events a Hub keeps for subscribers that start
// from an earlier sequence number.
const Keep = 1024

// subscriberBuffer is how many events a subscriber may be behind before
// it is dropped (its channel closed): a stuck reader never holds up the
// coordinator.
const subscriberBuffer = 256

// Hub numbers and fans out the events of one sandbox.
type Hub struct {
	mu        sync.Mutex
	profile   string
	workspace string
	seq       uint64
	past      []ctl.Event
	subs      map[*subscriber]struct{}
	now       func() time.Time
}

type subscriber struct {
	ch chan ctl.Event
}

// New makes the hub of the sandbox of profile and workspace (they name
// the sandbox in every event).
func New(profile, workspace string) *Hub {
	return &Hub{profile: profile, workspace: workspace, subs: map[*subscriber]struct{}{}, now: time.Now}
}

// Publish numbers e, stamps it (version, time, profile, workspace) and
// hands it to every subscriber; it never blocks. A nil Hub (a test's
// coordinator without one) drops it.
func (h *Hub) Publish(e ctl.Event) ctl.Event {
	if h == nil {
		return e
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	e.V, e.Seq, e.Time = ctl.EventsVersion, h.seq, h.now().UTC()
	e.Profile, e.Workspace = h.profile, h.workspace
	h.past = append(h.past, e)
	if len(h.past) > Keep {
		h.past = append(h.past[:0:0], h.past[len(h.past)-Keep:]...)
	}
	for s := range h.subs {
		select {
		case s.ch <- e:
		default: // too far behind: dropped, its reader sees the close
			close(s.ch)
			delete(h.subs, s)
		}
	}
	return e
}

// Subscribe returns the events after sequence number since (those still
// kept, then every new one) and a function that ends the subscription.
// The channel is closed when the subscription ends or falls too far
// behind.
func (h *Hub) Subscribe(since uint64) (<-chan ctl.Event, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var backlog []ctl.Event
	for _, e := range h.past {
		if e.Seq > since {
			backlog = append(backlog, e)
		}
	}
	s := &subscriber{ch: make(chan ctl.Event, subscriberBuffer+len(backlog))}
	for _, e := range backlog {
		s.ch <- e
	}
	h.subs[s] = struct{}{}
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if _, ok := h.subs[s]; ok {
				delete(h.subs, s)
				close(s.ch)
			}
		})
	}
}

// Close ends every subscription (the sandbox is gone).
func (h *Hub) Close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		close(s.ch)
		delete(h.subs, s)
	}
}

// Subscribers is how many subscriptions are open (tests wait for one).
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Stream sends conn the events after since, each as a ctl.TypeEvent
// request and the next only after its reply, so that they arrive in
// order (a connection serves each notification in a goroutine of its
// own). It returns at once; the stream ends, and done runs (nil: nothing),
// when the subscription ends (the hub closed, or conn fell behind: conn
// is then closed) or conn goes away.
func (h *Hub) Stream(conn *ctl.Conn, since uint64, done func()) {
	ch, cancel := h.Subscribe(since)
	go func() {
		defer func() {
			cancel()
			if done != nil {
				done()
			}
		}()
		for {
			select {
			case e, ok := <-ch:
				if !ok {
					_ = conn.Close()
					return
				}
				if err := conn.Call(conn.Context(), ctl.TypeEvent, e, nil); err != nil {
					_ = conn.Close()
					return
				}
			case <-conn.Done():
				return
			}
		}
	}()
}
