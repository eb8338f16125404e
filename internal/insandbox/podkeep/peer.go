package podkeep

import (
	"net"
	"sync"
	"time"

	wire "github.com/lazaret-dev/lazaret/internal/wire/podkeep"
	"github.com/lazaret-dev/lazaret/internal/wire/termframe"
)

// peer is one linked client's connection.
type peer struct {
	conn net.Conn
	sent uint64        // the next output offset to send (the writer's)
	wake chan struct{} // new output or the exit
	gone chan struct{}
	once sync.Once
}

// poke tells p's writer there is something new; nil-safe.
func (p *peer) poke() {
	if p == nil {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// close ends p's connection; nil-safe.
func (p *peer) close() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		close(p.gone)
		_ = p.conn.Close()
	})
}

// link makes conn the linked client once it said Hello: the client
// linked before is closed (one at a time; the newest wins, as the user
// is where the newest link comes from).
func (k *Keeper) link(conn net.Conn) {
	_ = conn.SetReadDeadline(time.Now().Add(helloWait))
	typ, b, err := termframe.ReadFrame(conn)
	_ = conn.SetReadDeadline(time.Time{})
	off, derr := wire.DecodeCount(b)
	if err != nil || derr != nil || typ != wire.FrameHello {
		conn.Close()
		return
	}
	p := &peer{conn: conn, wake: make(chan struct{}, 1), gone: make(chan struct{})}
	k.mu.Lock()
	select {
	case <-k.done:
		k.mu.Unlock()
		conn.Close()
		return
	default:
	}
	// An offset beyond the output is a client of something else (or
	// hostile): it gets what comes from now on.
	p.sent = min(off, k.ring.end)
	old := k.client
	k.client = p
	k.mu.Unlock()
	old.close()
	go k.feed(p)
	k.serveInput(p)
}

// feed sends p the output from its offset on (Lost first for what the
// ring no longer has), then the exit once the command ended.
func (k *Keeper) feed(p *peer) {
	exitSent := false
	for {
		k.mu.Lock()
		var lost uint64
		if start := k.ring.start(); p.sent < start {
			lost, p.sent = start-p.sent, start
		}
		data := k.ring.read(p.sent, termframe.MaxFrame)
		exited, code := k.exited, k.code
		k.mu.Unlock()
		var b []byte
		if lost > 0 {
			b = termframe.Append(b, wire.FrameLost, wire.EncodeCount(lost))
		}
		if len(data) > 0 {
			b = termframe.Append(b, wire.FrameOutput, data)
		} else if exited && !exitSent {
			b = termframe.Append(b, wire.FrameExit, wire.EncodeExit(code))
			exitSent = true
		}
		if len(b) > 0 {
			if _, err := p.conn.Write(b); err != nil {
				k.drop(p)
				return
			}
			p.sent += uint64(len(data))
			continue
		}
		select {
		case <-p.wake:
		case <-p.gone:
			return
		}
	}
}

// serveInput reads p's frames until it goes away or is taken over.
func (k *Keeper) serveInput(p *peer) {
	defer k.drop(p)
	for {
		typ, b, err := termframe.ReadFrame(p.conn)
		if err != nil {
			return
		}
		k.mu.Lock()
		current, ptmx, exited := k.client == p, k.ptmx, k.exited
		k.mu.Unlock()
		if !current {
			return
		}
		switch typ {
		case wire.FrameInput:
			if ptmx != nil && !exited {
				_, _ = ptmx.Write(b)
			}
		case wire.FrameResize:
			if s, err := wire.DecodeSize(b); err == nil {
				k.setSize(s)
			}
		case wire.FrameHangup:
			k.hangUp()
		case wire.FrameExitSeen:
			if exited {
				k.finish.Do(func() { close(k.done) })
				return
			}
		}
	}
}

// drop unlinks p if it is the linked client, and closes it.
func (k *Keeper) drop(p *peer) {
	k.mu.Lock()
	if k.client == p {
		k.client = nil
	}
	k.mu.Unlock()
	p.close()
}
