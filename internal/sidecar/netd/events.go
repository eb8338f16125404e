package netd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// Denial events feed the coordinator's notices and prompts: a bounded ring
// the host reads with a long poll (netdapi.OpEvents). The agent controls how
// many there are, so the ring forgets the oldest; the host sees the gap in
// the sequence numbers.
const (
	maxEvents = 256
	// maxEventWait bounds one long poll below the control deadline.
	maxEventWait = 20 * time.Second
)

type eventRing struct {
	mu   sync.Mutex
	seq  uint64
	ring []netdapi.DenialEvent
	wake chan struct{} // closed and replaced on every push
}

func newEventRing() *eventRing { return &eventRing{wake: make(chan struct{})} }

func (e *eventRing) push(ev netdapi.DenialEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	ev.Seq = e.seq
	if len(e.ring) == maxEvents {
		e.ring = slices.Delete(e.ring, 0, 1)
	}
	e.ring = append(e.ring, ev)
	close(e.wake)
	e.wake = make(chan struct{})
}

// since returns the events after seq after, the newest seq and a channel
// closed at the next push.
func (e *eventRing) since(after uint64) ([]netdapi.DenialEvent, uint64, <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	i, _ := slices.BinarySearchFunc(e.ring, after+1, func(ev netdapi.DenialEvent, s uint64) int {
		return compareU64(ev.Seq, s)
	})
	return slices.Clone(e.ring[i:]), e.seq, e.wake
}

func compareU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// wait returns the events after seq after, waiting up to d for one.
func (e *eventRing) wait(ctx context.Context, after uint64, d time.Duration) ([]netdapi.DenialEvent, uint64) {
	evs, seq, wake := e.since(after)
	if len(evs) > 0 || d <= 0 {
		return evs, seq
	}
	t := time.NewTimer(min(d, maxEventWait))
	defer t.Stop()
	select {
	case <-wake:
	case <-t.C:
	case <-ctx.Done():
	}
	evs, seq, _ = e.since(after)
	return evs, seq
}

// Holding a denied DNS query: while a session can be asked (netdapi.OpHold),
// a query for a name outside allow_domains waits for the user's decision
// (netdapi.OpDecide) up to the hold time, so a name allowed at the prompt
// resolves on the agent's first try. The agent chooses the names, so
// identical names share one hold, at most maxHolds names wait at once (the
// others are denied at once, as without holding), and a decided name is
// never held again in this run. Only the host's control socket decides.
const (
	maxHolds   = 4
	maxWaiters = 64 // queries waiting on one name (retries, A and AAAA)
	maxDecided = 1024
)

type hold struct {
	done    chan struct{}
	allowed bool
	waiters int
}

type holds struct {
	mu      sync.Mutex
	dur     time.Duration
	waiting map[string]*hold
	decided map[string]bool
}

func newHolds() *holds { return &holds{waiting: map[string]*hold{}, decided: map[string]bool{}} }

func (h *holds) setDuration(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dur = d
}

func (h *holds) duration() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dur
}

// join returns the hold for name (first when this query opened it), or
// nil when the name is not to be held.
func (h *holds) join(name string) (hd *hold, first bool, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dur <= 0 || h.decided[name] {
		return nil, false, 0
	}
	if hd := h.waiting[name]; hd != nil {
		if hd.waiters >= maxWaiters {
			return nil, false, 0
		}
		hd.waiters++
		return hd, false, h.dur
	}
	if len(h.waiting) >= maxHolds {
		return nil, false, 0
	}
	hd = &hold{done: make(chan struct{}), waiters: 1}
	h.waiting[name] = hd
	return hd, true, h.dur
}

// expire ends hd's wait without a decision (the first waiter's timer).
func (h *holds) expire(name string, hd *hold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiting[name] == hd {
		delete(h.waiting, name)
		close(hd.done)
	}
}

// decide records the decision on name and releases its waiters.
func (h *holds) decide(name string, allowed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.decided) < maxDecided {
		h.decided[name] = true
	}
	if hd := h.waiting[name]; hd != nil {
		delete(h.waiting, name)
		hd.allowed = allowed
		close(hd.done)
	}
}

// await waits for hd's decision; true when the name was allowed.
func (h *holds) await(ctx context.Context, name string, hd *hold, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-hd.done:
	case <-t.C:
		h.expire(name, hd) // a no-op when decided or expired already
	case <-ctx.Done():
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return hd.allowed
}

// holdable reports whether a denied name may wait for a decision: only a
// name the policy could list exactly (so the user's "allow" means what it
// shows) that was refused for not being listed.
func holdable(name, why string) bool {
	if why != reasonNotListed {
		return false
	}
	return exactName(name)
}

// exactName reports whether name is a domain name the policy can list as
// it is (not an address, not a pattern).
func exactName(name string) bool {
	_, dom, err := netpolicy.ParseTarget(name)
	return err == nil && dom == name && !strings.HasPrefix(dom, "*.")
}

// held makes q wait for the user's decision when holding is on. allowed
// is the decision; reported is true when this name's hold was reported.
func (d *Daemon) held(ctx context.Context, q query, why string) (allowed, reported bool) {
	if !holdable(q.name, why) {
		return false, false
	}
	hd, first, dur := d.holds.join(q.name)
	if hd == nil {
		return false, false
	}
	if first {
		d.report(netdapi.DenialEvent{Dest: "dns " + q.name, Name: q.name, Reason: why, Held: true})
	}
	return d.holds.await(ctx, q.name, hd, dur), true
}

// report counts a denial and publishes it as an event.
func (d *Daemon) report(ev netdapi.DenialEvent) {
	d.countDenial(ev.Dest)
	ev.Time = time.Now().UTC()
	d.events.push(ev)
}

// handleDenialOps answers the event, hold and decide operations; ok is
// false for any other operation.
func (d *Daemon) handleDenialOps(ctx context.Context, req netdapi.Request) (resp netdapi.Response, ok bool) {
	switch req.Op {
	case netdapi.OpEvents:
		evs, seq := d.events.wait(ctx, req.After, time.Duration(req.WaitSeconds)*time.Second)
		return netdapi.Response{OK: true, Events: evs, Seq: seq}, true
	case netdapi.OpHold:
		if req.HoldSeconds < 0 || req.HoldSeconds > 60 {
			return netdapi.Response{Error: "hold_seconds must be 0..60"}, true
		}
		d.holds.setDuration(time.Duration(req.HoldSeconds) * time.Second)
		return netdapi.Response{OK: true}, true
	case netdapi.OpDecide:
		name := strings.ToLower(strings.TrimSuffix(req.Target, "."))
		if !exactName(name) {
			return netdapi.Response{Error: fmt.Sprintf("decide: %q is not an exact domain name", req.Target)}, true
		}
		if req.Allow {
			// The policy first: a released query decides again and must
			// find the name allowed.
			if r := d.handle(ctx, netdapi.Request{Version: netdapi.Version, Op: netdapi.OpAllow, Target: name, Reason: req.Reason}); !r.OK {
				return r, true
			}
		}
		d.holds.decide(name, req.Allow)
		d.logChange(fmt.Sprintf("%s: %s %s", req.Reason, map[bool]string{true: "allowed", false: "denied"}[req.Allow], name))
		return netdapi.Response{OK: true}, true
	}
	return netdapi.Response{}, false
}
