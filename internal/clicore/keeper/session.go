package keeper

import (
	"fmt"
	"net"
	"time"

	"github.com/creack/pty"

	"github.com/lazaret-dev/lazaret/internal/wire/termframe"
)

// drainWait bounds reading what the inner wrote just before it exited.
const drainWait = 2 * time.Second

// finishWait bounds handing a terminal its last frames.
const finishWait = 5 * time.Second

// pump copies the session's output into the screen and to the attached
// terminal until the PTY closes.
func (k *keeper) pump() {
	defer close(k.pumped)
	buf := make([]byte, readChunk)
	for {
		n, err := k.ptmx.Read(buf)
		if n > 0 {
			k.output(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// output takes one read of the session's output: to the attached
// terminal at once, and queued for the screen's copy.
func (k *keeper) output(p []byte) {
	k.mu.Lock()
	k.scr.write(p)
	c := k.client
	k.mu.Unlock()
	if c != nil {
		c.send(FrameOutput, append([]byte(nil), p...))
	}
}

// rang is the agent ringing the bell or asking for attention (the
// screen's feeder calls it): reported while detached, at most every
// attentionEvery.
func (k *keeper) rang() {
	k.mu.Lock()
	notify := k.client == nil && time.Since(k.attention) >= attentionEvery
	if notify {
		k.attention = time.Now()
	}
	k.mu.Unlock()
	if notify {
		k.log.Info("the agent asks for attention")
		k.tell(StateAttention)
	}
}

// attach makes conn the session's terminal: the screen redrawn at its
// size (unless fresh: the terminal of a session starting keeps what it
// showed, as without a keeper), the PTY resized (full-screen programs
// repaint), a terminal attached before told it was taken over.
func (k *keeper) attach(conn net.Conn, size Size, fresh bool) {
	p := newPeer(conn)
	k.mu.Lock()
	if k.ended {
		k.mu.Unlock()
		conn.Close()
		return
	}
	old := k.client
	k.client = p
	k.scr.resize(size)
	if !fresh {
		p.sendChunked(FrameOutput, k.scr.redraw())
	}
	_ = pty.Setsize(k.ptmx, &pty.Winsize{Rows: size.Rows, Cols: size.Cols})
	k.info.Attached = true
	k.mu.Unlock()
	k.answer("") // a spawner waiting for the first attach has its answer
	if old != nil {
		go old.finish(FrameTakenOver, nil)
		k.log.Info("attached from another terminal")
	} else {
		k.tell(StateAttached)
		k.log.Info("attached")
	}
	k.saveInfo()
	go k.readClient(p)
}

// readClient reads p's keys and sizes until it detaches or goes away.
func (k *keeper) readClient(p *peer) {
	for {
		typ, b, err := termframe.ReadFrame(p.conn)
		if err != nil {
			k.detach(p, p.wasDropped())
			return
		}
		k.mu.Lock()
		current, ptmx := k.client == p, k.ptmx
		k.mu.Unlock()
		if !current {
			return
		}
		switch typ {
		case FrameInput:
			_, _ = ptmx.Write(b)
		case FrameResize:
			if s, err := decodeSize(b); err == nil {
				k.mu.Lock()
				k.scr.resize(s)
				_ = pty.Setsize(ptmx, &pty.Winsize{Rows: s.Rows, Cols: s.Cols})
				k.mu.Unlock()
			}
		case FrameDetach:
			k.detach(p, true)
			return
		case FrameHangup:
			if k.o.OnCloseEnd {
				// The session hangs up; the client stays to be told its
				// exit code.
				k.log.Info("the terminal closed: the session ends (on_close = end)")
				ptmx.Close()
				continue
			}
			k.detach(p, false)
			return
		}
	}
}

// detach lets p go. chosen: the user detached (the keys) or the keeper
// dropped it; otherwise its terminal went away, which ends the session
// when on_close says so (the inner's terminal hangs up, as a plain
// terminal's would).
func (k *keeper) detach(p *peer, chosen bool) {
	k.mu.Lock()
	if k.client != p {
		k.mu.Unlock()
		return
	}
	k.client = nil
	k.info.Attached = false
	ended, ptmx, id := k.ended, k.ptmx, k.info.ShortID()
	k.mu.Unlock()
	p.drop()
	if ended {
		return
	}
	if !chosen && k.o.OnCloseEnd {
		k.log.Info("the terminal closed: the session ends (on_close = end)")
		ptmx.Close()
		return
	}
	k.tell(StateDetached)
	k.saveInfo()
	k.log.Info(fmt.Sprintf("detached; `lazaret attach %s %s` takes it back", k.o.Profile, id))
}

// wait returns the inner's exit code once it exited and its last output
// went to the attached terminal, if any.
func (k *keeper) wait() int {
	code := <-k.exited
	select {
	case <-k.pumped:
	case <-time.After(drainWait):
	}
	k.mu.Lock()
	k.ended = true
	c := k.client
	k.client = nil
	text := k.scr.text()
	k.mu.Unlock()
	k.ptmx.Close()
	k.scr.close()
	k.answer(fmt.Sprintf("exited %d\n%s", code, text))
	if c == nil {
		k.log.Info("the session ended while detached", "exit", code)
		return code
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(finishWait))
	c.finish(FrameExit, encodeExit(code))
	k.log.Info("the session ended", "exit", code)
	return code
}

// hangUp ends the session as a terminal going away would (a signal to
// the keeper); false when no session runs yet.
func (k *keeper) hangUp() bool {
	k.mu.Lock()
	ptmx := k.ptmx
	k.mu.Unlock()
	if ptmx == nil {
		return false
	}
	ptmx.Close()
	return true
}
