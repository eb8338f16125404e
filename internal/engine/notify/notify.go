// Package notify tells the user of the events of an unattended sandbox
// ([notify]: docs/NOTIFY.md): a desktop notification on the session bus,
// a signed webhook, an ntfy post, a command. Each notifier has its own
// goroutine and bounded queue, so one that hangs, refuses or fails delays
// no other and nothing of the coordinator: the dispatcher never blocks
// on a notifier, it drops (and counts) what a full queue cannot take.
//
// A notification names the sandbox (profile, the workspace's base name),
// the kind and the request id; the sandbox's own text (ctl.Event.Detail)
// only with include_request, escaped and shortened. It carries no action:
// an approval is given with `lazaret approvals`, never from a
// notification.
package notify

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// Notified are the kinds of event that notify; the others (a session
// started, attached, an approval decided) are the user's own doing.
var Notified = map[string]bool{
	ctl.EventApprovalPending: true,
	ctl.EventNetDenied:       true,
	ctl.EventSessionEnded:    true,
	ctl.EventAgentAttention:  true,
	ctl.EventSandboxStopped:  true,
}

// Bounds of what a notification carries and of the work behind it.
const (
	// MaxDetail is how many characters of the request's text
	// include_request adds.
	MaxDetail = 200
	// maxReason bounds lazaret's own explanation.
	maxReason = 200
	// queueLen is each notifier's queue; beyond it notices are dropped.
	// It holds what the rate limit lets through at once (a minute's
	// pending approvals and a notice of every other kind) twice over.
	queueLen = 2 * (PendingPerMinute + 5)
	// drainGrace is how long stop lets the notifiers deliver what is
	// queued (the sandbox.stopped notice) before it cancels them.
	drainGrace = 3 * time.Second
)

// Notice is one notification: the event as it may leave the coordinator
// (workspace as its base name, Detail only with include_request), and
// how many events of its kind were merged into it by the rate limit.
type Notice struct {
	ctl.Event
	// Merged: the rate limit held this many events of the kind (this
	// one the last of them) and this notice stands for all of them; 0:
	// it stands for itself only.
	Merged int `json:"merged,omitempty"`
}

// notifier delivers notices from its queue until the queue closes or
// ctx ends.
type notifier interface {
	name() string
	run(ctx context.Context, q <-chan Notice)
}

// Option changes a default of Start (tests, benchmarks).
type Option func(*options)

type options struct {
	busAddress string
	httpClient *http.Client
	secret     *string
	backoff    time.Duration
	window     time.Duration
	pendingMax int
	cmdTimeout time.Duration
}

// WithBusAddress is the D-Bus address of the desktop notifier instead of
// the user's session bus.
func WithBusAddress(addr string) Option { return func(o *options) { o.busAddress = addr } }

// WithHTTPClient is the webhook's and ntfy's client (a test's, trusting
// its server's CA); redirects are refused whatever it says.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithSecret is the webhook's key instead of its configured source.
func WithSecret(s string) Option { return func(o *options) { o.secret = &s } }

// WithBackoff is the first retry's delay (doubled each time).
func WithBackoff(d time.Duration) Option { return func(o *options) { o.backoff = d } }

// WithWindow is the rate limit's window instead of RateWindow.
func WithWindow(d time.Duration) Option { return func(o *options) { o.window = d } }

// Source is the event stream (an *events.Hub).
type Source interface {
	Subscribe(since uint64) (<-chan ctl.Event, func())
}

// Start starts the notifiers of cfg on the events of src published from
// now on and returns the function that stops them: it lets them deliver
// what is queued for a few seconds, then cancels them. A notifier that
// cannot work (no session bus, an unreadable webhook key) is one warning
// in log, and the others run.
func Start(ctx context.Context, cfg config.Notify, src Source, log *slog.Logger, opts ...Option) (stop func()) {
	o := options{backoff: time.Second, window: RateWindow, pendingMax: PendingPerMinute, cmdTimeout: CommandTimeout}
	for _, f := range opts {
		f(&o)
	}
	ns := build(ctx, cfg, &o, log)
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d := &dispatcher{cfg: cfg, log: log, limit: newLimiter(o.window, o.pendingMax), quit: make(chan struct{}), since: time.Now().Add(-time.Second)}
	var wg sync.WaitGroup
	for _, n := range ns {
		q := make(chan Notice, queueLen)
		d.queues = append(d.queues, queue{name: n.name(), ch: q})
		wg.Add(1)
		go func() { defer wg.Done(); n.run(ctx, q) }()
	}
	// Subscribed before Start returns: every event published after it
	// is seen.
	sub, unsubscribe := src.Subscribe(0)
	done := make(chan struct{})
	go func() { d.run(src, sub, unsubscribe); close(done) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(d.quit)
			<-done
			idle := make(chan struct{})
			go func() { wg.Wait(); close(idle) }()
			select {
			case <-idle:
			case <-time.After(drainGrace):
			}
			cancel()
			<-idle
		})
	}
}

// build makes the notifiers cfg names that can work here.
func build(ctx context.Context, cfg config.Notify, o *options, log *slog.Logger) []notifier {
	var ns []notifier
	if cfg.Desktop {
		if n, err := newDesktop(o.busAddress); err != nil {
			log.Warn("notify: no desktop notifications", "err", err)
		} else {
			n.log = log
			ns = append(ns, n)
		}
	}
	if cfg.Webhook != nil {
		if n, err := newWebhook(ctx, cfg.Webhook, o, log); err != nil {
			log.Warn("notify: no webhook", "err", err)
		} else {
			ns = append(ns, n)
		}
	}
	if cfg.Ntfy != nil {
		ns = append(ns, newNtfy(cfg.Ntfy, o, log))
	}
	if len(cfg.Command) > 0 {
		ns = append(ns, &command{argv: cfg.Command, timeout: o.cmdTimeout, log: log})
	}
	return ns
}

type queue struct {
	name    string
	ch      chan Notice
	dropped int
}

type dispatcher struct {
	cfg    config.Notify
	log    *slog.Logger
	limit  *limiter
	queues []queue
	quit   chan struct{}
	since  time.Time // Start's time, less a second of slack
	last   uint64    // the last event's sequence number
}

// run filters, limits and fans out the events until quit; then it
// flushes the merged counts and closes the queues. A subscription the
// hub dropped (the dispatcher fell behind a burst) is taken again from
// the last event seen: the hub keeps the recent past.
func (d *dispatcher) run(src Source, sub <-chan ctl.Event, unsubscribe func()) {
	defer func() {
		for _, n := range d.limit.flush() {
			d.send(n)
		}
		for _, q := range d.queues {
			close(q.ch)
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	defer func() { unsubscribe() }()
	for {
		var tick <-chan time.Time
		if at, ok := d.limit.next(); ok {
			timer.Reset(time.Until(at))
			tick = timer.C
		}
		select {
		case e, ok := <-sub:
			if !ok {
				unsubscribe()
				sub, unsubscribe = src.Subscribe(d.last)
				continue
			}
			d.handle(e)
		case <-tick:
			for _, n := range d.limit.due(time.Now()) {
				d.send(n)
			}
		case <-d.quit:
			d.drain(src, sub, unsubscribe)
			return
		}
	}
}

// drain takes what the hub holds already (the last events before stop),
// from a new subscription if the hub dropped this one.
func (d *dispatcher) drain(src Source, sub <-chan ctl.Event, unsubscribe func()) {
	resubscribed := false
	for {
		select {
		case e, ok := <-sub:
			if !ok {
				if resubscribed {
					return
				}
				unsubscribe()
				sub, unsubscribe = src.Subscribe(d.last)
				defer unsubscribe()
				resubscribed = true
				continue
			}
			d.handle(e)
		default:
			return
		}
	}
}

// handle notifies e if its kind notifies and the rate limit admits it.
func (d *dispatcher) handle(e ctl.Event) {
	if e.Seq <= d.last {
		return
	}
	if d.last != 0 && e.Seq > d.last+1 {
		// Fell behind further than the hub keeps: say so, once a gap.
		d.log.Warn("notify: events missed while behind", "count", e.Seq-d.last-1)
	}
	d.last = e.Seq
	// What happened before Start (the hub's kept past) is not news.
	if !Notified[e.Kind] || e.Time.Before(d.since) {
		return
	}
	if n, ok := d.limit.admit(filter(e, d.cfg.IncludeRequest), time.Now()); ok {
		d.send(n)
	}
}

// send queues n for every notifier without waiting: a full queue (a
// notifier stuck on a hung receiver) loses n, and the loss is logged.
func (d *dispatcher) send(n Notice) {
	for i := range d.queues {
		q := &d.queues[i]
		select {
		case q.ch <- n:
		default:
			q.dropped++
			if q.dropped == 1 || q.dropped%100 == 0 {
				d.log.Warn("notify: notifier behind, notification dropped", "notifier", q.name, "dropped", q.dropped)
			}
		}
	}
}

// filter is e as a notification may carry it.
func filter(e ctl.Event, includeRequest bool) Notice {
	// Ids and names are lazaret's, escaped all the same: one rule.
	e.Profile, e.Session, e.Request = visible.Line(e.Profile), visible.Line(e.Session), visible.Line(e.Request)
	e.Workspace = visible.Line(filepath.Base(e.Workspace))
	e.Reason = shorten(visible.Line(e.Reason), maxReason)
	e.From = ""
	if includeRequest {
		e.Detail = shorten(visible.Line(e.Detail), MaxDetail)
	} else {
		e.Detail = ""
	}
	return Notice{Event: e}
}

// shorten cuts s to at most n characters, marking the cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
