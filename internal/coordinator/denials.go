package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/audit"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/ctl"
	"github.com/lazaret-dev/lazaret/internal/netdapi"
)

// Network denials reach the user: netd reports each denial (a long poll
// on its control socket); the coordinator turns them into one-line
// notices for every attached session (rate-limited: sidecar.Limiter) and,
// while a session has a terminal, asks about a denied DNS name whose
// lookup netd holds. The prompt goes only to a session's own CLI over the
// control socket, which nothing in the sandbox reaches; the sandbox only
// chooses the name, which every display escapes.
const (
	// holdFor is how long a denied lookup waits for the user's answer.
	holdFor = 25 * time.Second
	// maxQueued bounds the names waiting for a prompt (one is open at a
	// time); a name already queued is not queued again.
	maxQueued = 8
	// eventWait is one long poll.
	eventWait = 10 * time.Second
	// maxPrompts prompts at most are shown per promptWindow: an agent
	// cycling through new names must not keep the terminal taken.
	maxPrompts   = 6
	promptWindow = time.Minute
)

// denialRouter routes one sandbox's denials.
type denialRouter struct {
	d   *Deps
	lim *sidecar.Limiter

	mu      sync.Mutex
	ignored map[string]bool // "ignore for this run"
	queued  map[string]bool
	queue   chan string
	asked   []time.Time // prompts shown in the last promptWindow
	cl      *netdapi.Client
}

// withDenials makes c report its denials to the sessions of d.
func withDenials(d *Deps, c *sidecar.Component) *sidecar.Component {
	if d.Server == nil {
		return c
	}
	r := &denialRouter{d: d, lim: sidecar.NewLimiter(), ignored: map[string]bool{}, queued: map[string]bool{}, queue: make(chan string, maxQueued)}
	c.OnDenials(r.run)
	return c
}

func (r *denialRouter) run(ctx context.Context, cl *netdapi.Client) {
	r.cl = cl
	go r.holdLoop(ctx, cl)
	go r.promptLoop(ctx, cl)
	var after uint64
	for ctx.Err() == nil {
		evs, seq, err := cl.Events(ctx, after, eventWait)
		if err != nil {
			r.d.Log.Debug("denial events", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if after > 0 && seq > after && int(seq-after) > len(evs) {
			r.lim.Lost(int(seq-after) - len(evs))
		}
		after = seq
		for _, ev := range evs {
			r.event(ctx, ev)
		}
		if line, ok := r.lim.Summary(time.Now()); ok {
			r.d.Server.Broadcast(ctl.TypeNetNotice, ctl.NetNotice{Line: line})
		}
	}
}

// event routes one denial: a held name to the prompt queue, anything else
// to a notice. A held name that cannot be queued (queue full, too many
// prompts lately) is denied for this run at once rather than left waiting,
// and gets the notice with its allow command.
func (r *denialRouter) event(ctx context.Context, ev netdapi.DenialEvent) {
	if ev.Secret != "" {
		r.secretRefused(ctx, ev)
		return
	}
	r.mu.Lock()
	ignored := ev.Name != "" && r.ignored[ev.Name]
	queued, refused := false, false
	if ev.Held && !ignored {
		queued = r.queued[ev.Name]
		if !queued && r.mayPrompt(time.Now()) {
			select {
			case r.queue <- ev.Name:
				r.queued[ev.Name], queued = true, true
			default:
			}
		}
		refused = !queued
	}
	r.mu.Unlock()
	if refused {
		if err := r.cl.Decide(ctx, ev.Name, false, "prompt: too many denied names at once"); err != nil {
			r.d.Log.Debug("releasing a held name", "err", err)
		}
	}
	if !ignored && !queued {
		r.notice(ev)
	}
}

// mayPrompt counts a prompt against the rate limit; r.mu is held.
func (r *denialRouter) mayPrompt(now time.Time) bool {
	i := 0
	for i < len(r.asked) && now.Sub(r.asked[i]) >= promptWindow {
		i++
	}
	r.asked = r.asked[i:]
	if len(r.asked) >= maxPrompts {
		return false
	}
	r.asked = append(r.asked, now)
	return true
}

func (r *denialRouter) notice(ev netdapi.DenialEvent) {
	if !r.lim.Allow(ev.Dest, time.Now()) {
		return
	}
	if line := sidecar.Notice(r.d.Profile.Name, ev); line != "" {
		r.d.Server.Broadcast(ctl.TypeNetNotice, ctl.NetNotice{Line: line})
	}
}

// promptSession is the session asked: the oldest one with a terminal.
func (r *denialRouter) promptSession() *ctl.Session {
	for _, s := range r.d.Server.Sessions() {
		if s.TTY {
			return s
		}
	}
	return nil
}

// holdLoop has netd hold denied lookups only while a session could be
// asked.
func (r *denialRouter) holdLoop(ctx context.Context, cl *netdapi.Client) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	holding := false
	for {
		if want := r.promptSession() != nil; want != holding {
			d := time.Duration(0)
			if want {
				d = holdFor
			}
			if err := cl.Hold(ctx, d); err == nil {
				holding = want
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// promptLoop asks about one queued name at a time.
func (r *denialRouter) promptLoop(ctx context.Context, cl *netdapi.Client) {
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-r.queue:
			r.ask(ctx, cl, name)
			r.mu.Lock()
			delete(r.queued, name)
			r.mu.Unlock()
		}
	}
}

// ask prompts for name and applies the answer; with nobody to ask, the
// denial becomes a notice.
func (r *denialRouter) ask(ctx context.Context, cl *netdapi.Client, name string) {
	sess := r.promptSession()
	ans := ctl.NetAnswer{Choice: ctl.NetNone}
	if sess != nil {
		uni, reg := sidecar.NameForms(name)
		p := ctl.NetPrompt{Name: name, Unicode: uni, Registrable: reg, Profile: r.d.Profile.Name,
			ConfigLine: sidecar.ConfigLine(r.d.Profile.Name, name), WaitSeconds: int(holdFor / time.Second)}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		if err := sess.Call(pctx, ctl.TypeNetPrompt, p, &ans); err != nil {
			ans.Choice = ctl.NetNone
		}
		cancel()
	}
	if _, ok := decisions[ans.Choice]; !ok {
		ans.Choice = ctl.NetNone
	}
	// Nobody asked (no terminal after all, or an escalation prompt had
	// it): the name is denied for this run, so its lookups do not wait
	// again, and the user gets the notice with the allow command.
	allow := ans.Choice == ctl.NetOnce || ans.Choice == ctl.NetAlways
	if err := cl.Decide(ctx, name, allow, "prompt: "+ans.Choice); err != nil {
		r.d.Log.Error("applying the answer to a denied name", "name", name, "err", err)
	}
	if ans.Choice == ctl.NetNone {
		r.notice(netdapi.DenialEvent{Dest: "dns " + name, Name: name})
	} else {
		// The user has just decided: the lookups still in flight (retries,
		// the other address family) get no notice for a minute.
		r.lim.Allow("dns "+name, time.Now())
	}
	if ans.Choice == ctl.NetIgnore {
		r.mu.Lock()
		if len(r.ignored) < 1024 {
			r.ignored[name] = true
		}
		r.mu.Unlock()
	}
	r.audit(ctx, sess, name, ans.Choice)
}

// secretRefused audits a placeholder netd saw headed for a host its
// secret is not for, and tells the sessions.
func (r *denialRouter) secretRefused(ctx context.Context, ev netdapi.DenialEvent) {
	r.notice(ev)
	if r.d.Audit == nil {
		return
	}
	e := audit.Entry{Kind: audit.KindSecretRefused, Profile: r.d.Profile.Name,
		Fields: map[string]string{"secret": ev.Secret, "host": ev.Name}}
	if _, err := r.d.Audit(ctx, e); err != nil {
		r.d.Log.Error("audit of a refused placeholder", "err", err)
	}
}

// decisions name each answer in the audit trail.
var decisions = map[string]string{
	ctl.NetOnce: "allowed once", ctl.NetAlways: "allowed always (config line shown)",
	ctl.NetDeny: "denied", ctl.NetIgnore: "ignored for this run", ctl.NetNone: "not asked (no terminal)",
}

func (r *denialRouter) audit(ctx context.Context, sess *ctl.Session, name, choice string) {
	if r.d.Audit == nil {
		return
	}
	e := audit.Entry{Kind: audit.KindPolicyChange, Profile: r.d.Profile.Name,
		Fields: map[string]string{"change": "network denial prompt", "name": name, "decision": decisions[choice]}}
	if sess != nil {
		e.Session = sess.ID
	}
	if _, err := r.d.Audit(ctx, e); err != nil {
		r.d.Log.Error("audit of a network decision", "err", err)
	}
}
