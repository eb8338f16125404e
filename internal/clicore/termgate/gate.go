// Package termgate is the terminal gate both CLIs put between the user's
// terminal and a session's command (the local PTY attach, lazaret-kube's
// exec stream): while the escalation prompt has the terminal, keys go to
// the prompt and the command's output waits.
package termgate

import (
	"io"
	"sync"
	"time"
)

// Gate lets another part of lazaret take the terminal over for a while
// (the escalation prompt): while paused, keys read from the terminal go to
// the taker instead of the command, and the command's output is held back
// so it cannot draw over the taker's screen. The zero value is not usable;
// a nil *Gate forwards unconditionally.
type Gate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	sink   *io.PipeWriter
	// hungUp: the terminal went away; nothing pauses or holds any more.
	hungUp bool
	// onHangUp run once the terminal went away (OnHangUp).
	onHangUp []func()
	// discardUntil: input read before then is dropped, not forwarded
	// (Discard).
	discardUntil time.Time
	// now replaces time.Now (tests).
	now func() time.Time
	// out serialises writes to the terminal between the command's output
	// and lazaret's notices; midLine is true when the command's last
	// output did not end a line.
	out     sync.Mutex
	midLine bool
	// routed, when set (tests), is told after each routing decision.
	routed chan struct{}
}

// NewGate returns an open gate.
func NewGate() *Gate {
	g := &Gate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Pause stops forwarding and returns the reader on which terminal input
// arrives from now on (until Resume). Input read between the pause and the
// end of flush (which discards what the terminal still queues) is dropped:
// it was typed for the command, not for the taker. (A key the copying
// goroutine read just before the flush but routes just after it still
// reaches the taker, before the taker has shown anything: the taker's
// readability gate, prompt.ReadGate, drops it with every other key typed
// before the prompt was readable.) Whatever the taker did not read when
// Resume closes its reader is dropped, never forwarded to the command.
func (g *Gate) Pause(flush func() error) io.Reader {
	pr, pw := io.Pipe()
	g.mu.Lock()
	if g.hungUp {
		// No terminal to take over: the taker's input has ended.
		g.mu.Unlock()
		_ = pw.Close()
		return pr
	}
	if g.sink != nil {
		_ = g.sink.Close()
	}
	g.paused, g.sink = true, nil
	g.mu.Unlock()
	if flush != nil {
		_ = flush()
	}
	g.mu.Lock()
	if g.hungUp {
		_ = pw.Close()
	} else {
		g.sink = pw
	}
	g.mu.Unlock()
	return pr
}

// Resume restarts forwarding; the reader Pause returned sees EOF.
func (g *Gate) Resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sink != nil {
		_ = g.sink.Close()
	}
	g.paused, g.sink = false, nil
	g.cond.Broadcast()
}

// Discard drops the terminal's input for d from now instead of
// forwarding it to the command: a prompt that left the screen because its
// request ended (withdrawn) calls it before Resume, so the keys the human
// typed for that prompt, not having seen it go, never reach the sandbox.
// The readability gate of prompts (prompt.MinReadable), mirrored.
func (g *Gate) Discard(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if until := g.clock().Add(d); until.After(g.discardUntil) {
		g.discardUntil = until
	}
}

// OnHangUp registers f to run (once, in a goroutine of its own) when the
// terminal went away: the session link denies the prompts that were on
// it. Safe on a nil gate (f never runs).
func (g *Gate) OnHangUp(f func()) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hungUp {
		go f()
		return
	}
	g.onHangUp = append(g.onHangUp, f)
}

func (g *Gate) clock() time.Time {
	if g.now != nil {
		return g.now()
	}
	return time.Now()
}

// HangUp ends the gate's pauses for good (the terminal went away): the
// taker's reader ends (EOF, not an error: the escalation prompt then
// waits for its request to be withdrawn, rather than answering it as if
// the human had denied it), held output is let go (its write fails), and
// a later Pause returns a reader that has ended. Safe on a nil gate.
func (g *Gate) HangUp() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sink != nil {
		_ = g.sink.Close()
	}
	if !g.hungUp {
		for _, f := range g.onHangUp {
			go f()
		}
		g.onHangUp = nil
	}
	g.hungUp, g.paused, g.sink = true, false, nil
	g.cond.Broadcast()
}

// CopyIn forwards terminal input to the command, or to the taker while
// paused, until either side fails. It returns the error that ended the
// reading of src (io.EOF at its end), nil when writing to dst failed
// (the command's side ended).
func (g *Gate) CopyIn(dst io.Writer, src io.Reader) error {
	buf := make([]byte, 4096)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			var paused, discard bool
			var sink *io.PipeWriter
			if g != nil {
				g.mu.Lock()
				paused, sink = g.paused, g.sink
				discard = !paused && g.clock().Before(g.discardUntil)
				g.mu.Unlock()
			}
			switch {
			case discard: // typed for a prompt that was withdrawn
			case !paused:
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return nil
				}
			case sink != nil:
				_, _ = sink.Write(buf[:n]) // fails only once resumed: the key is dropped
			}
			if g != nil && g.routed != nil {
				g.routed <- struct{}{}
			}
		}
		if err != nil {
			return err
		}
	}
}

// CopyOut forwards the command's output, holding it while paused. It
// returns the error of writing to dst (the user's terminal), nil when the
// command's side ended.
func (g *Gate) CopyOut(dst io.Writer, src io.Reader) error {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if g == nil {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return werr
				}
			} else if werr := g.write(dst, buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return nil
		}
	}
}

// Held is dst as the command's output goes to it: each write waits while
// a pause holds the output (CopyOut, for a writer the command writes to).
func (g *Gate) Held(dst io.Writer) io.Writer {
	if g == nil {
		return dst
	}
	return held{g, dst}
}

type held struct {
	g   *Gate
	dst io.Writer
}

func (h held) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := h.g.write(h.dst, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// write writes the command's output p to dst once no pause holds it.
func (g *Gate) write(dst io.Writer, p []byte) error {
	g.mu.Lock()
	for g.paused {
		g.cond.Wait()
	}
	g.mu.Unlock()
	g.out.Lock()
	defer g.out.Unlock()
	_, err := dst.Write(p)
	g.midLine = p[len(p)-1] != '\n'
	return err
}
