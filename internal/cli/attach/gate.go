package attach

import (
	"io"
	"sync"
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
	if g.sink != nil {
		_ = g.sink.Close()
	}
	g.paused, g.sink = true, nil
	g.mu.Unlock()
	if flush != nil {
		_ = flush()
	}
	g.mu.Lock()
	g.sink = pw
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

// copyIn forwards terminal input to the command, or to the taker while
// paused.
func (g *Gate) copyIn(dst io.Writer, src io.Reader) {
	if g == nil {
		_, _ = io.Copy(dst, src)
		return
	}
	buf := make([]byte, 4096)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			g.mu.Lock()
			paused, sink := g.paused, g.sink
			g.mu.Unlock()
			switch {
			case !paused:
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			case sink != nil:
				_, _ = sink.Write(buf[:n]) // fails only once resumed: the key is dropped
			}
			if g.routed != nil {
				g.routed <- struct{}{}
			}
		}
		if err != nil {
			return
		}
	}
}

// copyOut forwards the command's output, holding it while paused.
func (g *Gate) copyOut(dst io.Writer, src io.Reader) {
	if g == nil {
		_, _ = io.Copy(dst, src)
		return
	}
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			g.mu.Lock()
			for g.paused {
				g.cond.Wait()
			}
			g.mu.Unlock()
			g.out.Lock()
			_, werr := dst.Write(buf[:n])
			g.midLine = buf[n-1] != '\n'
			g.out.Unlock()
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
