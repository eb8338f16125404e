package coordinator

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
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
	// withdrawGrace is how long the CLI has to answer the prompt's call
	// once the prompt was withdrawn (it then says what it did: shown and
	// withdrawn, or never shown).
	withdrawGrace = 5 * time.Second
)

// denialRouter routes one sandbox's denials.
type denialRouter struct {
	d   *Deps
	lim *sidecar.Limiter

	mu      sync.Mutex
	ignored map[string]bool // "ignore for this run"
	queued  map[string]bool
	queue   chan heldName
	asked   []time.Time // prompts shown in the last promptWindow
	cl      *netdapi.Client
	// prompts numbers the prompts, for their withdrawal.
	prompts uint64
}

// heldName is a denied name whose lookup netd holds until the hold
// expires (netd's timer starts when it reports the name, as ours does).
type heldName struct {
	name  string
	until time.Time
}

// holdEnd is when the hold of a name reported at t expires.
func holdEnd(t, now time.Time) time.Time {
	if t.IsZero() || t.After(now) {
		t = now
	}
	return t.Add(holdFor)
}

// withDenials makes c report its denials to the sessions of d.
func withDenials(d *Deps, c *sidecar.Component) *sidecar.Component {
	if d.Server == nil {
		return c
	}
	r := &denialRouter{d: d, lim: sidecar.NewLimiter(), ignored: map[string]bool{}, queued: map[string]bool{}, queue: make(chan heldName, maxQueued)}
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
			case r.queue <- heldName{ev.Name, holdEnd(ev.Time, time.Now())}:
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
	r.d.Events.Publish(ctl.Event{Kind: ctl.EventNetDenied, Detail: sidecar.Shown(ev.Dest)})
	if line := sidecar.Notice(r.d.Profile.Name, ev); line != "" {
		r.d.Server.Broadcast(ctl.TypeNetNotice, ctl.NetNotice{Line: line})
	}
}

// promptSession is the session asked: the oldest one with a terminal.
func (r *denialRouter) promptSession() *ctlserver.Session {
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
		if want := r.promptSession() != nil || r.d.Approvals.AnswerElsewhere(); want != holding {
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

// promptLoop asks about one queued name at a time, in order; a name whose
// lookup stopped waiting while it was queued is not shown (the next one
// is, at once).
func (r *denialRouter) promptLoop(ctx context.Context, cl *netdapi.Client) {
	for {
		select {
		case <-ctx.Done():
			return
		case h := <-r.queue:
			r.ask(ctx, cl, h)
			r.mu.Lock()
			delete(r.queued, h.name)
			r.mu.Unlock()
		}
	}
}

// outcome is what became of one DNS prompt, for the decision and the
// audit trail.
type outcome struct {
	ans     ctl.NetAnswer
	shownOn *ctlserver.Session // the terminal it was sent to; nil: nobody asked
	// answeredFrom: the terminal, or `lazaret approvals` (pid, uid);
	// answerFrom: [escalation] answer_from.
	answeredFrom, answerFrom string
}

// ask prompts for name and applies the answer; with nobody to ask, the
// denial becomes a notice.
func (r *denialRouter) ask(ctx context.Context, cl *netdapi.Client, h heldName) {
	o := outcome{ans: ctl.NetAnswer{Choice: ctl.NetNone}}
	if time.Now().Before(h.until) {
		o = r.prompt(ctx, h)
	} else {
		o.ans.Withdrawn = escprompt.WithdrawExpired // its lookup failed while queued
	}
	ans := o.ans
	if _, ok := decisions[ans.Choice]; !ok {
		ans.Choice = ctl.NetNone
	}
	// Nobody answered (no terminal, an escalation prompt had it, or the
	// prompt was withdrawn): the name is denied for this run, so its
	// lookups do not wait again, and the user gets the notice with the
	// allow command.
	allow := ans.Choice == ctl.NetOnce || ans.Choice == ctl.NetAlways
	if err := cl.Decide(ctx, h.name, allow, "prompt: "+ans.Choice); err != nil {
		r.d.Log.Error("applying the answer to a denied name", "name", h.name, "err", err)
	}
	if ans.Choice == ctl.NetNone {
		r.notice(netdapi.DenialEvent{Dest: "dns " + h.name, Name: h.name})
	} else {
		// The user has just decided: the lookups still in flight (retries,
		// the other address family) get no notice for a minute.
		r.lim.Allow("dns "+h.name, time.Now())
	}
	if ans.Choice == ctl.NetIgnore {
		r.mu.Lock()
		if len(r.ignored) < 1024 {
			r.ignored[h.name] = true
		}
		r.mu.Unlock()
	}
	r.audit(ctx, o, h.name, ans)
}

// prompt asks the oldest terminal about h until its lookup stops waiting:
// then the prompt is withdrawn (escprompt.TypePromptCancel with its ID),
// and the CLI has withdrawGrace to say what it did. The other sessions
// are told where the prompt went: a lookup carries no session, so any of
// them may be the one whose agent asked. The prompt is a pending request
// too (`lazaret approvals`), bounded like the prompt by the held lookup;
// with answer_from = "any" it is asked even when no terminal is.
func (r *denialRouter) prompt(ctx context.Context, h heldName) outcome {
	sess := r.promptSession()
	hub := r.d.Approvals
	if sess == nil && !hub.AnswerElsewhere() {
		return outcome{ans: ctl.NetAnswer{Choice: ctl.NetNone}}
	}
	r.mu.Lock()
	r.prompts++
	id := "net-" + strconv.FormatUint(r.prompts, 10)
	r.mu.Unlock()
	wait := time.Until(h.until)
	pctx, cancel := context.WithTimeout(ctx, wait+withdrawGrace)
	defer cancel()
	var pend *approvals.Pending
	if hub != nil {
		shown := sidecar.Shown(h.name)
		pend = hub.Add(ctl.PendingRequest{Kind: ctl.RequestNetwork, Detail: "DNS lookup of " + shown + " (outside the allowlist)\n",
			Summary: "DNS " + shown, Hash: escprompt.HashHex([]byte(h.name))})
	}
	term := make(chan outcome, 1)
	if sess != nil {
		go func() { term <- r.promptTerminal(ctx, pctx, sess, h, id, wait) }()
	}
	o := r.firstAnswer(pctx, term, pend, sess, id)
	o.answerFrom = hub.AnswerFrom()
	return o
}

// firstAnswer waits for the terminal's answer or the hub's, whichever
// comes first, and withdraws the other; a terminal that did not ask (an
// escalation prompt had it) leaves the hub to answer until the hold ends.
func (r *denialRouter) firstAnswer(pctx context.Context, term chan outcome, pend *approvals.Pending, sess *ctlserver.Session, id string) outcome {
	var done <-chan struct{}
	if pend != nil {
		done = pend.Done()
	}
	var last outcome
	for {
		select {
		case o := <-term:
			term, last = nil, o
			if pend == nil {
				return o
			}
			if o.ans.Choice != ctl.NetNone {
				o.answeredFrom = "terminal of " + SessionName(sess)
				if r.d.Approvals.Decide(pend, approvals.Decision{Action: netAction(o.ans.Choice), From: o.answeredFrom}) {
					return o
				}
				return hubOutcome(pend.Decision())
			}
			if !r.d.Approvals.AnswerElsewhere() || o.ans.Withdrawn == escprompt.WithdrawStopping {
				r.d.Approvals.Decide(pend, approvals.Decision{Action: ctl.DecisionWithdrawn, From: cmpOr(o.ans.Withdrawn, "not shown")})
				return o
			}
		case <-done:
			if sess != nil && term != nil {
				_ = sess.Notify(escprompt.TypePromptCancel, escprompt.PromptCancel{RequestID: id, Reason: escprompt.WithdrawAnsweredElsewhere})
			}
			return hubOutcome(pend.Decision())
		case <-pctx.Done():
			if pend != nil {
				r.d.Approvals.Decide(pend, approvals.Decision{Action: ctl.DecisionWithdrawn, From: escprompt.WithdrawExpired})
			}
			if term != nil {
				return <-term // the terminal's call ends with pctx too
			}
			if last.ans.Choice == "" {
				last.ans = ctl.NetAnswer{Choice: ctl.NetNone, Withdrawn: escprompt.WithdrawExpired}
			}
			return last
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// netAction is the hub's action of a network answer.
func netAction(choice string) string {
	if choice == ctl.NetOnce || choice == ctl.NetAlways {
		return ctl.ActionApprove
	}
	return ctl.ActionDeny
}

// hubOutcome is the outcome of a network prompt decided through the hub:
// approve allows the name for this run (as "once"), deny denies it.
func hubOutcome(d approvals.Decision) outcome {
	o := outcome{ans: ctl.NetAnswer{Choice: ctl.NetDeny}, answeredFrom: d.From}
	switch d.Action {
	case ctl.ActionApprove:
		o.ans.Choice = ctl.NetOnce
	case ctl.ActionDeny:
	default:
		o.ans = ctl.NetAnswer{Choice: ctl.NetNone, Withdrawn: d.From}
	}
	return o
}

// promptTerminal asks sess's terminal (pctx bounds the call; the prompt
// is withdrawn after wait).
func (r *denialRouter) promptTerminal(ctx, pctx context.Context, sess *ctlserver.Session, h heldName, id string, wait time.Duration) outcome {
	uni, reg := sidecar.NameForms(h.name)
	p := ctl.NetPrompt{Name: h.name, Unicode: uni, Registrable: reg, Profile: r.d.Profile.Name, ID: id,
		ConfigLine: sidecar.ConfigLine(r.d.Profile.Name, h.name), WaitSeconds: max(1, int(wait.Round(time.Second)/time.Second))}
	withdraw := time.AfterFunc(wait, func() {
		_ = sess.Notify(escprompt.TypePromptCancel, escprompt.PromptCancel{RequestID: id, Reason: escprompt.WithdrawExpired})
	})
	defer withdraw.Stop()
	told := r.tellOthers(sess, h.name)
	o := outcome{shownOn: sess}
	switch err := sess.Call(pctx, ctl.TypeNetPrompt, p, &o.ans); {
	case err == nil:
	case ctx.Err() != nil:
		o.ans = ctl.NetAnswer{Choice: ctl.NetNone, Withdrawn: escprompt.WithdrawStopping}
	case pctx.Err() != nil:
		o.ans = ctl.NetAnswer{Choice: ctl.NetNone, Withdrawn: escprompt.WithdrawExpired}
	default: // the terminal's session ended under the prompt
		o.ans = ctl.NetAnswer{Choice: ctl.NetNone, Withdrawn: escprompt.WithdrawHungUp}
	}
	if o.ans.Choice == ctl.NetNone && o.ans.Withdrawn == "" {
		o.shownOn = nil // the CLI did not show it (an escalation prompt had the terminal)
	}
	if told && o.ans.Choice == ctl.NetNone && o.ans.Withdrawn != "" {
		r.tellOthersDone(sess, h.name, o.ans.Withdrawn)
	}
	return o
}

// SessionName names a session on a notice and in the audit trail as
// `lazaret status` lists it: its id's first 12 characters, its command
// and the CLI's pid.
func SessionName(s *ctlserver.Session) string {
	cmd := strings.Join(s.Command, " ")
	if cmd == "" {
		cmd = "?"
	}
	return fmt.Sprintf("session %s (%s, pid %d)", s.ID[:min(12, len(s.ID))], cmd, s.PeerPID)
}

// tellOthers tells every session but the asked one's where the prompt
// about name went; it reports whether there was anyone to tell.
func (r *denialRouter) tellOthers(asked *ctlserver.Session, name string) bool {
	line := fmt.Sprintf("lazaret: %s of %s is awaiting approval on the terminal of %s",
		sessionlinkAskedBy, sidecar.Shown(name), SessionName(asked))
	return r.notifyOthers(asked, line)
}

func (r *denialRouter) tellOthersDone(asked *ctlserver.Session, name, reason string) {
	r.notifyOthers(asked, fmt.Sprintf("lazaret: the prompt about %s on the terminal of %s was withdrawn: the request ended (%s)",
		sidecar.Shown(name), SessionName(asked), reason))
}

func (r *denialRouter) notifyOthers(asked *ctlserver.Session, line string) bool {
	told := false
	for _, s := range r.d.Server.Sessions() {
		if s == asked {
			continue
		}
		told = true
		if err := s.Notify(ctl.TypeNetNotice, ctl.NetNotice{Line: line}); err != nil {
			r.d.Log.Debug("notice to a session", "session", s.ID, "err", err)
		}
	}
	return told
}

// sessionlinkAskedBy is how a DNS prompt names who asked (the CLI's
// sessionlink.NetAskedBy: the coordinator does not import the CLI).
const sessionlinkAskedBy = "a lookup from this sandbox"

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

// decisionOf is what the audit trail records for ans: the human's answer,
// a withdrawal and why (shown, or still queued), or nobody asked.
func decisionOf(ans ctl.NetAnswer, shown bool) string {
	switch {
	case ans.Choice != ctl.NetNone:
		return decisions[ans.Choice]
	case ans.Withdrawn != "" && shown:
		return "withdrawn: the request ended (" + ans.Withdrawn + ")"
	case ans.Withdrawn != "":
		return "not shown: the request ended while queued (" + ans.Withdrawn + ")"
	}
	return decisions[ctl.NetNone]
}

func (r *denialRouter) audit(ctx context.Context, o outcome, name string, ans ctl.NetAnswer) {
	shownOn := o.shownOn
	if r.d.Audit == nil {
		return
	}
	e := audit.Entry{Kind: audit.KindPolicyChange, Profile: r.d.Profile.Name,
		Fields: map[string]string{"change": "network denial prompt", "name": name, "decision": decisionOf(ans, shownOn != nil),
			"asked_by": sessionlinkAskedBy}}
	if shownOn != nil {
		e.Session = shownOn.ID
		e.Fields["shown_on"] = "terminal of " + SessionName(shownOn)
	}
	if o.answeredFrom != "" && ans.Choice != ctl.NetNone {
		e.Fields["answered_from"] = o.answeredFrom
	}
	if o.answerFrom != "" {
		e.Fields["answer_from"] = o.answerFrom
	}
	if _, err := r.d.Audit(ctx, e); err != nil {
		r.d.Log.Error("audit of a network decision", "err", err)
	}
}
