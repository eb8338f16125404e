package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// ErrNoTerminal denies a request of a session without a terminal that may
// not be answered elsewhere (answer_from = "session").
var ErrNoTerminal = errors.New("session has no terminal for prompts")

// Prompter is an escalation prompter of a process that holds both the
// session's terminal prompt and the hub (a lazaret-kube session; the
// coordinator asks its CLI over the control socket instead): each prompt
// is registered in Hub and asked on Terminal, the first answer wins, and
// the terminal's prompt is withdrawn (escprompt.WithdrawAnsweredElsewhere)
// when `lazaret approvals answer` came first.
type Prompter struct {
	Hub *Hub
	// Terminal is the session's own prompt; nil when it has no terminal
	// (a request then waits for an answer through the hub, or is denied
	// with answer_from = "session").
	Terminal escprompt.Prompter
	// Session is the asking session's id and command, read at each prompt.
	Session func() (id string, command []string)
	// Timeout is pending_timeout (0: none).
	Timeout time.Duration
}

type termAnswer struct {
	a   escprompt.Answer
	err error
}

// Show asks the session's terminal only (a policy proposal: its manager
// registers it in the hub itself).
func (p *Prompter) Show(ctx context.Context, r escprompt.PromptRequest) (escprompt.Answer, error) {
	if p.Terminal == nil {
		return escprompt.Answer{Action: escprompt.Deny}, ErrNoTerminal
	}
	return p.Terminal.Prompt(ctx, r)
}

// Prompt implements escprompt.Prompter.
func (p *Prompter) Prompt(ctx context.Context, r escprompt.PromptRequest) (escprompt.Answer, error) {
	r.AnswerElsewhere = p.Hub.AnswerElsewhere()
	if p.Hub == nil || (p.Terminal == nil && !r.AnswerElsewhere) {
		return p.Show(ctx, r)
	}
	id, command := p.Session()
	pend := p.Hub.Add(ctl.PendingRequest{Kind: ctl.RequestEscalation, Session: id, SessionCommand: command,
		Detail: escprompt.Describe(r), Summary: escprompt.Summary(r), Hash: r.RequestHash})
	r.PendingID = pend.ID
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	term := make(chan termAnswer, 1)
	if p.Terminal != nil {
		go func() {
			a, err := p.Terminal.Prompt(tctx, r)
			term <- termAnswer{a, err}
		}()
	}
	// withdraw takes the terminal's prompt down and waits until it is.
	withdraw := func(reason string) {
		cancel(&escprompt.Withdrawn{Reason: reason})
		if p.Terminal != nil {
			<-term
		}
	}
	var expire <-chan time.Time
	if p.Timeout > 0 {
		t := time.NewTimer(p.Timeout)
		defer t.Stop()
		expire = t.C
	}
	here := "terminal of session " + id
	for {
		select {
		case t := <-term:
			term <- t // withdraw's wait, should the hub's answer win
			if ctx.Err() == nil {
				return p.fromTerminal(pend, t, here)
			}
		case <-pend.Done():
			withdraw(escprompt.WithdrawAnsweredElsewhere)
			return p.answerOf(pend.Decision()), nil
		case <-expire:
			expire = nil
			if p.Hub.Decide(pend, Decision{Action: ctl.DecisionExpired, From: "timeout"}) {
				withdraw(escprompt.WithdrawExpired)
				return p.answerOf(pend.Decision()), nil
			}
			continue
		case <-ctx.Done():
		}
		reason := escprompt.WithdrawReason(ctx)
		p.Hub.Decide(pend, Decision{Action: ctl.DecisionWithdrawn, From: reason})
		withdraw(reason)
		return escprompt.Answer{Action: escprompt.Deny}, &escprompt.Withdrawn{Reason: reason}
	}
}

// fromTerminal takes the terminal's answer unless the hub's came first.
func (p *Prompter) fromTerminal(pend *Pending, t termAnswer, here string) (escprompt.Answer, error) {
	action := ctl.ActionDeny
	switch {
	case t.err != nil:
		action = ctl.DecisionWithdrawn
	case t.a.Action == escprompt.Approve:
		action = ctl.ActionApprove
	}
	if !p.Hub.Decide(pend, Decision{Action: action, From: here}) {
		return p.answerOf(pend.Decision()), nil
	}
	if t.err != nil {
		return escprompt.Answer{Action: escprompt.Deny}, fmt.Errorf("asking the session: %w", t.err)
	}
	t.a.AnsweredFrom, t.a.AnswerFrom, t.a.Expired = here, p.Hub.AnswerFrom(), false
	return t.a, nil
}

// answerOf is the escalation answer of a decision made through the hub.
func (p *Prompter) answerOf(d Decision) escprompt.Answer {
	a := escprompt.Answer{Action: escprompt.Deny, AnsweredFrom: d.From, AnswerFrom: p.Hub.AnswerFrom()}
	switch d.Action {
	case ctl.ActionApprove:
		a.Action = escprompt.Approve
	case ctl.DecisionExpired:
		a.Reason, a.Expired = "no answer within "+shortDuration(p.Timeout), true
	}
	return a
}

// shortDuration is d without its zero tails ("5m", not "5m0s").
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
