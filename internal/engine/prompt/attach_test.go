package prompt

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// TestRunnerDetachHoldsAndAttachRedrawsGated: a detach takes the prompt
// down without answering it; the attach draws it again behind a closed
// readability gate, so a key typed at once (the agent timing its prompt
// to the attach, or the user typing for the shell) is dropped, and only
// a key after MinReadable answers. Control: without the gate the early
// key answers.
func TestRunnerDetachHoldsAndAttachRedrawsGated(t *testing.T) {
	for _, gated := range []bool{true, false} {
		p := ptytest.Open(t)
		r := quickGate(&Runner{TTY: p.TTY, Resolve: resolver, noReadGate: !gated})
		t.Cleanup(r.Wait)
		ch := ask(r, req("r1", "make", "x"))
		p.WaitFor(t, "abort lazaret")
		r.SetAttached(false)
		p.WaitFor(t, "\x1b[?1049l") // taken down
		select {
		case a := <-ch:
			t.Fatalf("a detach answered the prompt: %v", a.Action)
		default:
		}
		p.Reset()
		r.SetAttached(true)
		p.WaitFor(t, "abort lazaret")
		if _, err := p.Ptmx.Write([]byte("d")); err != nil {
			t.Fatal(err)
		}
		if !gated {
			if a := <-ch; a.Action != escprompt.Deny {
				t.Fatalf("control: the early key did not answer (%v)", a.Action)
			}
			continue
		}
		readable(r.readDelay)
		p.Ptmx.Write([]byte("a"))
		if a := <-ch; a.Action != escprompt.Approve {
			t.Fatalf("a key typed at the redraw answered it: %v", a.Action)
		}
	}
}

// TestRunnerDetachedQueuesUndrawn: a prompt that arrives while detached
// is not drawn until the attach.
func TestRunnerDetachedQueuesUndrawn(t *testing.T) {
	p := ptytest.Open(t)
	r := quickGate(&Runner{TTY: p.TTY, Resolve: resolver})
	t.Cleanup(r.Wait)
	r.SetAttached(false)
	ch := ask(r, req("r1", "make", "x"))
	waitPending(t, r, "r1", nil)
	if p.Shows("abort lazaret") {
		t.Fatal("drawn while detached")
	}
	r.SetAttached(true)
	p.WaitFor(t, "abort lazaret")
	readable(r.readDelay)
	p.Ptmx.Write([]byte("a"))
	if a := <-ch; a.Action != escprompt.Approve {
		t.Fatalf("answer %v", a.Action)
	}
}

// TestRunnerNoTTYLeavesAnswerElsewherePending: without a terminal a
// request that may be answered elsewhere waits for its withdrawal (the
// coordinator's answer from `lazaret approvals`); control: one that may
// not is denied at once (ErrNoTTY).
func TestRunnerNoTTYLeavesAnswerElsewherePending(t *testing.T) {
	r := &Runner{}
	rq := req("r1", "make")
	if _, err := r.Prompt(context.Background(), rq); !errors.Is(err, ErrNoTTY) {
		t.Fatalf("control: %v", err)
	}
	rq.AnswerElsewhere = true
	ch := make(chan error, 1)
	go func() {
		_, err := r.Prompt(context.Background(), rq)
		ch <- err
	}()
	waitPending(t, r, "r1", ch)
	r.Withdraw("r1", escprompt.WithdrawAnsweredElsewhere)
	var w *escprompt.Withdrawn
	if err := <-ch; !errors.As(err, &w) || w.Reason != escprompt.WithdrawAnsweredElsewhere {
		t.Fatalf("after the withdrawal: %v", err)
	}
}

// waitPending waits until the request id is pending in r; a result on
// answered (the request ended instead) fails t.
func waitPending(t *testing.T, r *Runner, id string, answered <-chan error) {
	t.Helper()
	for {
		r.mu.Lock()
		_, pending := r.pending[id]
		r.mu.Unlock()
		if pending {
			return
		}
		select {
		case err := <-answered:
			t.Fatalf("denied at once: %v", err)
		default:
			runtime.Gosched()
		}
	}
}
