package escalation

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

const testSessionID = "0123456789abcdef0123456789abcdef"

// promptRig is a real control socket with one attached session whose
// CLI holds every prompt until it is withdrawn (or answers it when
// answer is set), and a second, session-less connection for `lazaret
// approvals`.
type promptRig struct {
	hub      *approvals.Hub
	sess     *ctlserver.Session
	cli      *ctl.Client
	other    *ctl.Client
	shown    chan escprompt.PromptRequest
	canceled chan escprompt.PromptCancel
	answer   chan escprompt.Answer
}

func newPromptRig(t *testing.T, uid int, answerFrom string) *promptRig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.sock")
	ln, err := ctlserver.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := ctlserver.NewServer(uid, nil)
	r := &promptRig{hub: approvals.New(nil, answerFrom), shown: make(chan escprompt.PromptRequest, 4),
		canceled: make(chan escprompt.PromptCancel, 4), answer: make(chan escprompt.Answer, 1)}
	attached := make(chan *ctlserver.Session, 1)
	srv.Attached = func(s *ctlserver.Session) error { attached <- s; return nil }
	for typ, h := range r.hub.Handlers("dev", "/w") {
		srv.Handle(typ, h)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	r.cli = ctl.NewClient(nil)
	r.cli.Handle(escprompt.TypePrompt, func(ctx context.Context, req *ctl.Request) (any, error) {
		var pr escprompt.PromptRequest
		_ = req.Decode(&pr)
		r.shown <- pr
		select {
		case a := <-r.answer:
			return &a, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	r.cli.Handle(escprompt.TypePromptCancel, func(_ context.Context, req *ctl.Request) (any, error) {
		var pc escprompt.PromptCancel
		_ = req.Decode(&pc)
		r.canceled <- pc
		return nil, nil
	})
	err = r.cli.Connect(ctx, path, ctl.Hello{Session: &ctl.SessionInfo{ID: testSessionID, PID: 1, Profile: "dev", TTY: true, Command: []string{"shell"}}})
	if uid != os.Getuid() {
		if err == nil {
			t.Fatal("a peer of another uid was answered")
		}
		return r
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cli.Close() })
	r.sess = <-attached
	r.other = ctl.NewClient(nil)
	if err := r.other.Connect(ctx, path, ctl.Hello{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.other.Close() })
	return r
}

func (r *promptRig) ask(timeout time.Duration) <-chan escprompt.Answer {
	p := newPrompter(r.sess, r.hub, timeout)
	out := make(chan escprompt.Answer, 1)
	go func() {
		a, _ := p.Prompt(context.Background(), escprompt.PromptRequest{RequestID: "req-1", Argv: []string{"touch", "f"},
			Executable: "/usr/bin/touch", RequestHash: "h1"})
		out <- a
	}()
	return out
}

func TestPromptAnsweredThroughTheHubWithdrawsTheTerminal(t *testing.T) {
	r := newPromptRig(t, os.Getuid(), config.AnswerFromAny)
	got := r.ask(0)
	pr := <-r.shown
	if pr.PendingID == "" || !pr.AnswerElsewhere {
		t.Fatalf("prompt %+v: no pending id or answer_elsewhere", pr)
	}
	ctx := context.Background()
	l, err := r.other.ApprovalsList(ctx)
	if err != nil || len(l.Pending) != 1 || l.Pending[0].Hash != "h1" || l.Pending[0].Session != testSessionID {
		t.Fatalf("list %+v %v", l, err)
	}
	if _, err := r.other.ApprovalAnswer(ctx, ctl.ApprovalAnswer{ID: pr.PendingID, Hash: "h1", Action: ctl.ActionApprove}); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.Action != escprompt.Approve || a.AnswerFrom != config.AnswerFromAny || a.AnsweredFrom == "" || a.AnsweredFrom[:17] != "lazaret approvals" {
		t.Fatalf("answer %+v", a)
	}
	if pc := <-r.canceled; pc.RequestID != "req-1" || pc.Reason != escprompt.WithdrawAnsweredElsewhere {
		t.Fatalf("withdrawal %+v", pc)
	}
	// A second answer is refused: answered first.
	_, err = r.other.ApprovalAnswer(ctx, ctl.ApprovalAnswer{ID: pr.PendingID, Hash: "h1", Action: ctl.ActionDeny})
	if !errors.Is(err, ctl.ErrAnsweredFirst) {
		t.Fatalf("second answer: %v", err)
	}
}

func TestPromptAnsweredOnTheTerminalFirst(t *testing.T) {
	r := newPromptRig(t, os.Getuid(), config.AnswerFromAny)
	got := r.ask(0)
	pr := <-r.shown
	r.answer <- escprompt.Answer{Action: escprompt.Deny, AnsweredFrom: "forged"}
	a := <-got
	if a.Action != escprompt.Deny || a.AnsweredFrom != "terminal of session "+testSessionID {
		t.Fatalf("answer %+v (AnsweredFrom must be the coordinator's, never the wire's)", a)
	}
	_, err := r.other.ApprovalAnswer(context.Background(), ctl.ApprovalAnswer{ID: pr.PendingID, Hash: "h1", Action: ctl.ActionApprove})
	if !errors.Is(err, ctl.ErrAnsweredFirst) {
		t.Fatalf("late answer: %v", err)
	}
}

func TestPromptAnswerFromSessionRefusesTheHub(t *testing.T) {
	r := newPromptRig(t, os.Getuid(), config.AnswerFromSession)
	got := r.ask(0)
	pr := <-r.shown
	if pr.AnswerElsewhere {
		t.Fatal("answer_elsewhere set with answer_from = session")
	}
	_, err := r.other.ApprovalAnswer(context.Background(), ctl.ApprovalAnswer{ID: pr.PendingID, Hash: "h1", Action: ctl.ActionApprove})
	if !errors.Is(err, ctl.ErrAnswerNotAllowed) {
		t.Fatalf("answer: %v", err)
	}
	r.answer <- escprompt.Answer{Action: escprompt.Approve}
	if a := <-got; a.Action != escprompt.Approve {
		t.Fatalf("the terminal's answer after a refused one: %+v", a)
	}
}

func TestPromptExpires(t *testing.T) {
	r := newPromptRig(t, os.Getuid(), config.AnswerFromSession)
	got := r.ask(30 * time.Millisecond)
	<-r.shown
	a := <-got
	if a.Action != escprompt.Deny || !a.Expired || a.Reason != "no answer within 30ms" || a.AnsweredFrom != "timeout" {
		t.Fatalf("answer %+v", a)
	}
	if pc := <-r.canceled; pc.Reason != escprompt.WithdrawExpired {
		t.Fatalf("withdrawal %+v", pc)
	}
}

// TestApprovalsOnlyForTheSameUser: the control socket answers nobody of
// another uid, approvals included; the same client with our uid is the
// positive control (every test above).
func TestApprovalsOnlyForTheSameUser(t *testing.T) {
	newPromptRig(t, os.Getuid()+1, config.AnswerFromAny)
}
