package approvals

import (
	"context"
	"errors"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/events"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// fakeTerminal is a session's prompt: it shows each request (shown) and
// returns answer, or the withdrawal when ctx ends (as prompt.Runner does).
type fakeTerminal struct {
	shown     chan escprompt.PromptRequest
	answer    chan escprompt.Answer
	withdrawn chan string
}

func newFakeTerminal() *fakeTerminal {
	return &fakeTerminal{shown: make(chan escprompt.PromptRequest, 1), answer: make(chan escprompt.Answer, 1), withdrawn: make(chan string, 1)}
}

func (f *fakeTerminal) Prompt(ctx context.Context, r escprompt.PromptRequest) (escprompt.Answer, error) {
	f.shown <- r
	select {
	case a := <-f.answer:
		return a, nil
	case <-ctx.Done():
		reason := escprompt.WithdrawReason(ctx)
		f.withdrawn <- reason
		return escprompt.Answer{Action: escprompt.Deny}, &escprompt.Withdrawn{Reason: reason}
	}
}

func request() escprompt.PromptRequest {
	return escprompt.PromptRequest{RequestID: "r1", RequestHash: "abc", Executable: "/usr/bin/touch", Argv: []string{"touch", "f"}}
}

func session() (string, []string) { return "s1", []string{"shell"} }

type result struct {
	a   escprompt.Answer
	err error
}

func ask(p *Prompter) chan result {
	ch := make(chan result, 1)
	go func() {
		a, err := p.Prompt(context.Background(), request())
		ch <- result{a, err}
	}()
	return ch
}

// TestPrompterAnsweredThroughTheHub: the prompt is a pending request of
// the hub, bound to its hash; `lazaret approvals answer` approves it and
// the terminal's prompt is withdrawn as answered elsewhere.
func TestPrompterAnsweredThroughTheHub(t *testing.T) {
	h := New(nil, config.AnswerFromAny)
	term := newFakeTerminal()
	res := ask(&Prompter{Hub: h, Terminal: term, Session: session})
	shown := <-term.shown
	if !shown.AnswerElsewhere || shown.PendingID == "" {
		t.Fatalf("the terminal's prompt does not say it may be answered elsewhere: %+v", shown)
	}
	list := h.List()
	if len(list) != 1 || list[0].ID != shown.PendingID || list[0].Session != "s1" || list[0].Hash != "abc" {
		t.Fatalf("pending %+v", list)
	}
	if _, err := h.Answer(ctl.ApprovalAnswer{ID: shown.PendingID, Hash: "abc", Action: ctl.ActionApprove}, CLIFrom(7, 1000)); err != nil {
		t.Fatal(err)
	}
	if reason := <-term.withdrawn; reason != escprompt.WithdrawAnsweredElsewhere {
		t.Errorf("terminal withdrawn as %q", reason)
	}
	r := <-res
	if r.err != nil || r.a.Action != escprompt.Approve || r.a.AnsweredFrom != "lazaret approvals (pid 7, uid 1000)" || r.a.AnswerFrom != config.AnswerFromAny {
		t.Fatalf("answer %+v %v", r.a, r.err)
	}
}

// TestPrompterAnsweredOnTheTerminal: the terminal's answer decides; a
// later answer through the hub is refused as answered first.
func TestPrompterAnsweredOnTheTerminal(t *testing.T) {
	h := New(nil, config.AnswerFromAny)
	term := newFakeTerminal()
	res := ask(&Prompter{Hub: h, Terminal: term, Session: session})
	shown := <-term.shown
	term.answer <- escprompt.Answer{Action: escprompt.Deny}
	if r := <-res; r.err != nil || r.a.Action != escprompt.Deny || r.a.AnsweredFrom != "terminal of session s1" {
		t.Fatalf("answer %+v %v", r.a, r.err)
	}
	if _, err := h.Answer(ctl.ApprovalAnswer{ID: shown.PendingID, Hash: "abc", Action: ctl.ActionApprove}, CLIFrom(7, 1000)); !errors.Is(err, ctl.ErrAnsweredFirst) {
		t.Fatalf("late hub answer: %v", err)
	}
}

// TestPrompterWithoutTerminal: answer_from = "session" denies a session
// without a terminal at once and registers nothing; with "any" (the
// control) the request waits in the hub and is answered there.
func TestPrompterWithoutTerminal(t *testing.T) {
	h := New(nil, config.AnswerFromSession)
	a, err := (&Prompter{Hub: h, Session: session}).Prompt(context.Background(), request())
	if !errors.Is(err, ErrNoTerminal) || a.Action != escprompt.Deny || len(h.List()) != 0 {
		t.Fatalf("answer_from = session without a terminal: %+v %v %v", a, err, h.List())
	}
	ev := events.New("dev", "/w")
	pending, stop := ev.Subscribe(0)
	defer stop()
	h = New(ev, config.AnswerFromAny)
	res := ask(&Prompter{Hub: h, Session: session})
	e := <-pending
	if e.Kind != ctl.EventApprovalPending {
		t.Fatalf("event %+v", e)
	}
	if _, err := h.Answer(ctl.ApprovalAnswer{ID: e.Request, Action: ctl.ActionDeny}, CLIFrom(7, 1000)); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.a.Action != escprompt.Deny || r.a.AnsweredFrom == "" {
		t.Fatalf("answer %+v %v", r.a, r.err)
	}
}
