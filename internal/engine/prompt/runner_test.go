package prompt

import (
	"context"
	"errors"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
	"golang.org/x/sys/unix"
)

func ask(r *Runner, rq escprompt.PromptRequest) chan escprompt.Answer {
	ch := make(chan escprompt.Answer, 1)
	go func() {
		a, _ := r.Prompt(context.Background(), rq)
		ch <- a
	}()
	return ch
}

// readable waits until a prompt just shown is readable (the gate's delay
// and a margin for the frame's write).
func readable(d time.Duration) { time.Sleep(d + 150*time.Millisecond) }

// quickGate makes r's readability gate short, so the tests of the other
// rules need not wait a second per key.
func quickGate(r *Runner) *Runner {
	r.readDelay, r.readDelaySet = 100*time.Millisecond, true
	return r
}

func TestRunnerOnPTY(t *testing.T) {
	p := ptytest.Open(t)
	var paused, resumed atomic.Int32
	r := quickGate(&Runner{TTY: p.TTY, Resolve: resolver, Pause: func(flush func() error) io.Reader { paused.Add(1); flush(); return nil }, Resume: func() { resumed.Add(1) }})
	t.Cleanup(r.Wait)
	ch := ask(r, req("r1", "make", "x"))
	p.WaitFor(t, "abort lazaret")
	readable(r.readDelay)
	if _, err := p.Ptmx.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if a := <-ch; a.Action != escprompt.Approve {
		t.Fatalf("answer %v", a.Action)
	}
	for i := 0; i < 500 && resumed.Load() == 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if paused.Load() != 1 || resumed.Load() != 1 {
		t.Fatalf("forwarding paused %d resumed %d", paused.Load(), resumed.Load())
	}
}

// TestRunnerFlushesPendingInput: a keystroke typed before the prompt
// appeared must not answer it. Control: without the flush (and without
// the readability gate, which drops it too) it does. The
// pending key is D, which answers at once; A would not be a reliable
// control, since A is refused until the request has been shown, and a key
// read before the prompt's first window size finds nothing shown yet.
func TestRunnerFlushesPendingInput(t *testing.T) {
	for _, flush := range []bool{true, false} {
		p := ptytest.Open(t)
		if _, err := p.Ptmx.Write([]byte("d")); err != nil {
			t.Fatal(err)
		}
		// Wait until the byte is in the terminal's input queue.
		for i := 0; ; i++ {
			n, err := unix.IoctlGetInt(int(p.TTY.Fd()), unix.TIOCINQ)
			if err != nil || i > 1000 {
				t.Fatalf("input never queued: %v", err)
			}
			if n == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		r := quickGate(&Runner{TTY: p.TTY, Resolve: resolver, noFlush: !flush, noReadGate: !flush})
		t.Cleanup(r.Wait)
		ch := ask(r, req("r1", "make", "x"))
		if !flush {
			if a := <-ch; a.Action != escprompt.Deny {
				t.Fatalf("control: pending 'd' did not deny (%v)", a.Action)
			}
			continue
		}
		p.WaitFor(t, "abort lazaret")
		readable(r.readDelay)
		p.Ptmx.Write([]byte("a"))
		if a := <-ch; a.Action != escprompt.Approve {
			t.Fatalf("pending input answered the prompt: %v", a.Action)
		}
	}
}

func TestRunnerNoTTYDenies(t *testing.T) {
	f, _ := os.Open(os.DevNull)
	defer f.Close()
	for _, tty := range []*os.File{nil, f} {
		a, err := (&Runner{TTY: tty}).Prompt(context.Background(), req("r1", "make"))
		if a.Action != escprompt.Deny || !errors.Is(err, ErrNoTTY) {
			t.Fatalf("no tty: %v %v", a.Action, err)
		}
	}
}

func TestRunnerQueuesAndAborts(t *testing.T) {
	p := ptytest.Open(t)
	aborted := make(chan struct{})
	r := quickGate(&Runner{TTY: p.TTY, Resolve: resolver, OnAbort: func() { close(aborted) }})
	t.Cleanup(r.Wait)
	ch1 := ask(r, req("r1", "make", "one"))
	p.WaitFor(t, "abort lazaret")
	ch2 := ask(r, req("r2", "make", "two"))
	p.WaitFor(t, "1 more waiting")
	readable(r.readDelay)
	p.Ptmx.Write([]byte("q"))
	if a := <-ch1; a.Action != escprompt.Abort {
		t.Fatalf("r1 %v", a.Action)
	}
	if a := <-ch2; a.Action != escprompt.Deny {
		t.Fatalf("r2 %v", a.Action)
	}
	<-aborted
}

// TestRunnerCloseRestoresTerminal: closing with a prompt on screen denies
// it and returns only after the program has left the terminal.
func TestRunnerCloseRestoresTerminal(t *testing.T) {
	p := ptytest.Open(t)
	r := &Runner{TTY: p.TTY, Resolve: resolver}
	ch := ask(r, req("r1", "make", "x"))
	p.WaitFor(t, "abort lazaret")
	r.Close()
	if a := <-ch; a.Action != escprompt.Deny {
		t.Fatalf("pending prompt answered %v on close", a.Action)
	}
	p.WaitFor(t, "\x1b[?1049l") // the alternate screen was left
}
