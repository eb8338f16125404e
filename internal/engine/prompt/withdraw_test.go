package prompt

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// calls records the runner's terminal hand-back in order.
type calls struct {
	mu  sync.Mutex
	log []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	c.log = append(c.log, s)
	c.mu.Unlock()
}

func (c *calls) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.log, ",")
}

func (c *calls) waitFor(t *testing.T, want string) {
	t.Helper()
	for i := 0; c.String() != want; i++ {
		if i > 500 {
			t.Fatalf("calls %q, want %q", c.String(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func withdrawRunner(t *testing.T, p *ptytest.Terminal, c *calls) *Runner {
	r := quickGate(&Runner{TTY: p.TTY, Resolve: resolver,
		Pause:   func(flush func() error) io.Reader { _ = flush(); return nil },
		Resume:  func() { c.add("resume") },
		Discard: func(d time.Duration) { c.add("discard " + d.String()) }})
	t.Cleanup(r.Close) // a prompt a failed test left up is withdrawn
	return r
}

// within waits for ch's outcome, failing the test after 5 s (a prompt
// that stays up would wait for ever).
func within(t *testing.T, ch chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("the prompt is still waiting")
	}
	return outcome{}
}

type outcome struct {
	a   escprompt.Answer
	err error
}

func askErr(r *Runner, ctx context.Context, rq escprompt.PromptRequest) chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		a, err := r.Prompt(ctx, rq)
		ch <- outcome{a, err}
	}()
	return ch
}

// TestRunnerWithdrawShown: a prompt whose request ended leaves the
// screen at once, the terminal says why, and the keys typed in the next
// readability delay are dropped (Discard, called before forwarding
// resumes); its Prompt is denied with the withdrawal. Control: a prompt
// the human answered drops nothing.
func TestRunnerWithdrawShown(t *testing.T) {
	p := ptytest.Open(t)
	var c calls
	r := withdrawRunner(t, p, &c)
	ch := askErr(r, context.Background(), req("r1", "make", "x"))
	p.WaitFor(t, "abort lazaret")
	r.Withdraw("r1", escprompt.WithdrawExpired)
	o := within(t, ch)
	var w *escprompt.Withdrawn
	if o.a.Action != escprompt.Deny || !errors.As(o.err, &w) || w.Reason != escprompt.WithdrawExpired {
		t.Fatalf("withdrawn prompt answered %v, %v", o.a.Action, o.err)
	}
	p.WaitFor(t, "lazaret: prompt withdrawn: the request ended (expired)")
	c.waitFor(t, "discard "+r.readDelay.String()+",resume")

	// Control: answered by the human, nothing is dropped.
	var c2 calls
	r2 := withdrawRunner(t, p, &c2)
	ch = askErr(r2, context.Background(), req("r2", "make", "x"))
	p.WaitFor(t, "abort lazaret")
	readable(r2.readDelay)
	p.Ptmx.Write([]byte("d"))
	if o := <-ch; o.a.Action != escprompt.Deny || o.err != nil {
		t.Fatalf("answered prompt: %v %v", o.a.Action, o.err)
	}
	c2.waitFor(t, "resume")
}

// TestRunnerWithdrawByContext: the requester's context ending withdraws
// the prompt with the reason of its cause.
func TestRunnerWithdrawByContext(t *testing.T) {
	p := ptytest.Open(t)
	var c calls
	r := withdrawRunner(t, p, &c)
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := askErr(r, ctx, req("r1", "make", "x"))
	p.WaitFor(t, "abort lazaret")
	cancel(&escprompt.Withdrawn{Reason: escprompt.WithdrawClientGone})
	if o := <-ch; !strings.Contains(o.err.Error(), escprompt.WithdrawClientGone) {
		t.Fatalf("err %v", o.err)
	}
	p.WaitFor(t, escprompt.WithdrawnLine(escprompt.WithdrawClientGone))
	c.waitFor(t, "discard "+r.readDelay.String()+",resume")
}

// TestRunnerWithdrawBeforeItArrives: a withdrawal that overtakes its
// prompt (control messages are handled concurrently) means the prompt is
// never shown, rather than shown for a request that already ended.
func TestRunnerWithdrawBeforeItArrives(t *testing.T) {
	p := ptytest.Open(t)
	var c calls
	r := withdrawRunner(t, p, &c)
	r.Withdraw("r1", escprompt.WithdrawClientGone)
	o := within(t, askErr(r, context.Background(), req("r1", "make", "x")))
	var w *escprompt.Withdrawn
	if o.a.Action != escprompt.Deny || !errors.As(o.err, &w) {
		t.Fatalf("answer %v %v", o.a.Action, o.err)
	}
	if c.String() != "" {
		t.Fatalf("the terminal was taken: %q", c.String())
	}
}

// TestRunnerWithdrawShowsNextAtOnce: with a second request queued, the
// withdrawal of the one on screen shows the next at once, saying why.
func TestRunnerWithdrawShowsNextAtOnce(t *testing.T) {
	p := ptytest.Open(t)
	var c calls
	r := withdrawRunner(t, p, &c)
	ch1 := askErr(r, context.Background(), req("r1", "make", "one"))
	p.WaitFor(t, "abort lazaret")
	ch2 := askErr(r, context.Background(), req("r2", "make", "two"))
	p.WaitFor(t, "1 more waiting")
	start := time.Now()
	r.Withdraw("r1", escprompt.WithdrawExpired)
	within(t, ch1)
	p.WaitFor(t, "the previous prompt was withdrawn")
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the next prompt took %v", d)
	}
	readable(r.readDelay)
	p.Ptmx.Write([]byte("d"))
	if o := <-ch2; o.a.Action != escprompt.Deny || o.err != nil {
		t.Fatalf("r2 %v %v", o.a.Action, o.err)
	}
	c.waitFor(t, "resume") // answered last: nothing dropped
}

// TestRunnerDenyAllOnHangUp: the terminal went away with a prompt on it:
// the request is denied at once with the reason "terminal closed", and so
// is any later one.
func TestRunnerDenyAllOnHangUp(t *testing.T) {
	p := ptytest.Open(t)
	var c calls
	r := withdrawRunner(t, p, &c)
	ch := askErr(r, context.Background(), req("r1", "make", "x"))
	p.WaitFor(t, "abort lazaret")
	r.DenyAll(escprompt.WithdrawHungUp)
	if o := within(t, ch); o.a.Action != escprompt.Deny || o.a.Reason != "terminal closed" {
		t.Fatalf("answer %+v %v", o.a, o.err)
	}
	if o := within(t, askErr(r, context.Background(), req("r2", "make", "x"))); o.a.Action != escprompt.Deny || o.a.Reason != "terminal closed" {
		t.Fatalf("later answer %+v %v", o.a, o.err)
	}
}
