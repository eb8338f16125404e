package sessionlink

import (
	"context"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// TestSetAttachedWithdrawsAndSkipsNetworkPrompts: a detach withdraws the
// network prompt on the screen ("terminal detached"), and while detached
// none is drawn (the lookup cannot wait for the next attach); control:
// attached again, the same prompt is registered for drawing.
func TestSetAttachedWithdrawsAndSkipsNetworkPrompts(t *testing.T) {
	p := ptytest.Open(t)
	l, err := New(Options{TTY: p.TTY})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	ctx, withdraw := context.WithCancelCause(context.Background())
	if !l.addNet("net-1", withdraw) {
		t.Fatal("control: an attached link refused a network prompt")
	}
	l.SetAttached(false)
	<-ctx.Done()
	if got := escprompt.WithdrawReason(ctx); got != escprompt.WithdrawDetached {
		t.Fatalf("withdrawn with %q", got)
	}
	if l.addNet("net-2", func(error) {}) {
		t.Fatal("a network prompt was taken while detached")
	}
	l.SetAttached(true)
	if !l.addNet("net-4", func(error) {}) {
		t.Fatal("an attached link refused a network prompt")
	}
}
