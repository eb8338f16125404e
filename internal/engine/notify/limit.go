package notify

import (
	"sort"
	"time"

	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// The rate limit: a flood of one kind (an agent retrying a denied name a
// thousand times) is one notification, then one per window saying how
// many were merged. Pending approvals each deserve their own, so their
// budget is larger, but still bounded.
const (
	// RateWindow: at most one notification per kind per window.
	RateWindow = 10 * time.Second
	// PendingPerMinute: at most this many approval.pending a minute.
	PendingPerMinute = 30
)

// limiter is a sliding-window budget per kind: budget notices per
// period; what exceeds it is counted and sent as one notice (the last
// event, Merged set) when the window has room again.
type limiter struct {
	window     time.Duration
	pendingMax int
	kinds      map[string]*kindState
}

type kindState struct {
	budget int
	period time.Duration
	sent   []time.Time // within the last period, oldest first
	merged int
	last   Notice
}

func newLimiter(window time.Duration, pendingMax int) *limiter {
	return &limiter{window: window, pendingMax: pendingMax, kinds: map[string]*kindState{}}
}

func (l *limiter) state(kind string) *kindState {
	k := l.kinds[kind]
	if k == nil {
		k = &kindState{budget: 1, period: l.window}
		if kind == ctl.EventApprovalPending {
			k.budget, k.period = l.pendingMax, time.Minute
		}
		l.kinds[kind] = k
	}
	return k
}

func (k *kindState) prune(now time.Time) {
	i := 0
	for i < len(k.sent) && !now.Before(k.sent[i].Add(k.period)) {
		i++
	}
	k.sent = k.sent[i:]
}

// admit reports whether n goes out now; if not it is merged into the
// next summary.
func (l *limiter) admit(n Notice, now time.Time) (Notice, bool) {
	k := l.state(n.Kind)
	k.prune(now)
	if len(k.sent) < k.budget && k.merged == 0 {
		k.sent = append(k.sent, now)
		return n, true
	}
	k.merged++
	k.last = n
	return Notice{}, false
}

// next is when the earliest summary is due.
func (l *limiter) next() (time.Time, bool) {
	var at time.Time
	found := false
	for _, k := range l.kinds {
		if k.merged == 0 {
			continue
		}
		var t time.Time // the window emptied: due now
		if len(k.sent) > 0 {
			t = k.sent[0].Add(k.period)
		}
		if !found || t.Before(at) {
			at, found = t, true
		}
	}
	return at, found
}

// due returns the summaries whose window has room at now.
func (l *limiter) due(now time.Time) []Notice {
	var out []Notice
	for _, kind := range l.sortedKinds() {
		k := l.kinds[kind]
		if k.merged == 0 {
			continue
		}
		k.prune(now)
		if len(k.sent) < k.budget {
			k.sent = append(k.sent, now)
			out = append(out, k.summary())
		}
	}
	return out
}

// flush returns every summary still held (at stop).
func (l *limiter) flush() []Notice {
	var out []Notice
	for _, kind := range l.sortedKinds() {
		if k := l.kinds[kind]; k.merged > 0 {
			out = append(out, k.summary())
		}
	}
	return out
}

func (k *kindState) summary() Notice {
	n := k.last
	n.Merged = k.merged
	k.merged, k.last = 0, Notice{}
	return n
}

func (l *limiter) sortedKinds() []string {
	ks := make([]string, 0, len(l.kinds))
	for k := range l.kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
