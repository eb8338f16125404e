package prompt

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/lazaret-dev/lazaret/internal/escprompt"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

type ptyRig struct {
	ptmx, tty *os.File
	mu        sync.Mutex
	out       bytes.Buffer
}

func newPTY(t *testing.T) *ptyRig {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	_ = pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120})
	// The attached shell has the terminal in raw mode, as attach does.
	if _, err := term.MakeRaw(int(tty.Fd())); err != nil {
		t.Fatal(err)
	}
	p := &ptyRig{ptmx: ptmx, tty: tty}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { tty.Close(); ptmx.Close() })
	return p
}

// waitFor waits (bounded) until the terminal output contains s.
func (p *ptyRig) waitFor(t *testing.T, s string) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		p.mu.Lock()
		ok := strings.Contains(p.out.String(), s)
		p.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("terminal never showed %q", s)
}

func ask(r *Runner, rq escprompt.PromptRequest) chan escprompt.Answer {
	ch := make(chan escprompt.Answer, 1)
	go func() {
		a, _ := r.Prompt(context.Background(), rq)
		ch <- a
	}()
	return ch
}

func TestRunnerOnPTY(t *testing.T) {
	p := newPTY(t)
	var paused, resumed atomic.Int32
	r := &Runner{TTY: p.tty, Resolve: resolver, Pause: func(flush func() error) io.Reader { paused.Add(1); flush(); return nil }, Resume: func() { resumed.Add(1) }}
	t.Cleanup(r.Wait)
	ch := ask(r, req("r1", "make", "x"))
	p.waitFor(t, "abort lazaret")
	if _, err := p.ptmx.Write([]byte("a")); err != nil {
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
// appeared must not answer it. Control: without the flush it does.
func TestRunnerFlushesPendingInput(t *testing.T) {
	for _, flush := range []bool{true, false} {
		p := newPTY(t)
		if _, err := p.ptmx.Write([]byte("a")); err != nil {
			t.Fatal(err)
		}
		// Wait until the byte is in the terminal's input queue.
		for i := 0; ; i++ {
			n, err := unix.IoctlGetInt(int(p.tty.Fd()), unix.TIOCINQ)
			if err != nil || i > 1000 {
				t.Fatalf("input never queued: %v", err)
			}
			if n == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		r := &Runner{TTY: p.tty, Resolve: resolver, noFlush: !flush}
		t.Cleanup(r.Wait)
		ch := ask(r, req("r1", "make", "x"))
		if !flush {
			if a := <-ch; a.Action != escprompt.Approve {
				t.Fatalf("control: pending 'a' did not approve (%v)", a.Action)
			}
			continue
		}
		p.waitFor(t, "abort lazaret")
		p.ptmx.Write([]byte("d"))
		if a := <-ch; a.Action != escprompt.Deny {
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
	p := newPTY(t)
	aborted := make(chan struct{})
	r := &Runner{TTY: p.tty, Resolve: resolver, OnAbort: func() { close(aborted) }}
	t.Cleanup(r.Wait)
	ch1 := ask(r, req("r1", "make", "one"))
	p.waitFor(t, "abort lazaret")
	ch2 := ask(r, req("r2", "make", "two"))
	p.waitFor(t, "1 more waiting")
	p.ptmx.Write([]byte("q"))
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
	p := newPTY(t)
	r := &Runner{TTY: p.tty, Resolve: resolver}
	ch := ask(r, req("r1", "make", "x"))
	p.waitFor(t, "abort lazaret")
	r.Close()
	if a := <-ch; a.Action != escprompt.Deny {
		t.Fatalf("pending prompt answered %v on close", a.Action)
	}
	p.waitFor(t, "\x1b[?1049l") // the alternate screen was left
}
