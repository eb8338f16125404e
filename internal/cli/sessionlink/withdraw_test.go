package sessionlink

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// TestNetPromptWithdrawn: the DNS prompt whose lookup stopped waiting is
// withdrawn by its ID: it leaves the terminal saying so, its answer says
// it was shown and withdrawn (not "nobody asked"), and the keys typed in
// the next readability delay are dropped (Discard before Resume).
// Control: a withdrawal of another ID changes nothing.
func TestNetPromptWithdrawn(t *testing.T) {
	tm := ptytest.Open(t)
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	l := &Link{term: newTermOwner(), opts: Options{TTY: tm.TTY,
		Pause:   func(flush func() error) io.Reader { _ = flush(); return nil },
		Resume:  func() { note("resume") },
		Discard: func(d time.Duration) { note("discard " + d.String()) }}}
	l.readDelay, l.readDelaySet = 100*time.Millisecond, true
	got := make(chan ctl.NetAnswer, 1)
	go func() {
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		if !l.addNet("net-1", cancel) {
			t.Error("addNet refused")
		}
		got <- l.netPrompt(ctx, ctl.NetPrompt{ID: "net-1", Name: "gone.example", Profile: "default", WaitSeconds: 25})
	}()
	tm.WaitFor(t, "a lookup from this sandbox")
	if l.withdrawNet("net-2", escprompt.WithdrawExpired) {
		t.Fatal("withdrew another prompt")
	}
	select {
	case a := <-got:
		t.Fatalf("answered by another prompt's withdrawal: %+v", a)
	case <-time.After(100 * time.Millisecond):
	}
	if !l.withdrawNet("net-1", escprompt.WithdrawExpired) {
		t.Fatal("prompt not found")
	}
	a := <-got
	if a.Choice != ctl.NetNone || a.Withdrawn != escprompt.WithdrawExpired {
		t.Fatalf("answer %+v", a)
	}
	tm.WaitFor(t, "lazaret: prompt withdrawn: the request ended (expired)")
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "discard 100ms" || order[1] != "resume" {
		t.Fatalf("hand-back %q: the keys typed for the prompt are not dropped before the shell gets them", order)
	}
}

// TestHangupDeniesPrompts: the terminal hung up with an escalation prompt
// on it: the request is denied at once with "terminal closed"; a network
// prompt is withdrawn the same way and a later one is not shown.
func TestHangupDeniesPrompts(t *testing.T) {
	tm := ptytest.Open(t)
	l, err := New(Options{TTY: tm.TTY})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	ans := make(chan escprompt.Answer, 1)
	go func() {
		a, _ := l.runner.Prompt(context.Background(), escprompt.PromptRequest{RequestID: "r1", Argv: []string{"make"}, Executable: "/usr/bin/make"})
		ans <- a
	}()
	tm.WaitFor(t, "abort lazaret")
	l.Hangup()
	select {
	case a := <-ans:
		if a.Action != escprompt.Deny || a.Reason != escprompt.WithdrawHungUp {
			t.Fatalf("answer %+v", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the prompt of a hung-up terminal still waits")
	}
	if l.addNet("net-1", func(error) {}) {
		t.Fatal("a network prompt would be shown on a hung-up terminal")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	l2, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	l2.addNet("n", cancel)
	l2.Hangup()
	var w *escprompt.Withdrawn
	if !errors.As(context.Cause(ctx), &w) || w.Reason != escprompt.WithdrawHungUp {
		t.Fatalf("network prompt not withdrawn: %v", context.Cause(ctx))
	}
}
