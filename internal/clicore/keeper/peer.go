package keeper

import (
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/unixsock"
	"github.com/lazaret-dev/lazaret/internal/wire/termframe"
)

// queueFrames bounds what waits for an attached terminal (with reads of
// readChunk bytes, at most 1 MiB). A terminal slower than the session's
// output holds it back, as a real terminal does (the session's writes
// wait: measured, a 20 MB flood dropped the bench's own terminal when it
// did not); one that takes nothing for stallLimit is let go (it may
// attach again) and the session runs on.
const (
	queueFrames = 256
	readChunk   = 4096
)

// stallLimit: how long a full queue waits for the terminal to take a
// frame before the terminal is dropped (a var for the tests).
var stallLimit = 10 * time.Second

// peer is one attached terminal's connection.
type peer struct {
	conn net.Conn
	out  chan []byte
	// space is signalled when the writer took a frame off out.
	space chan struct{}
	done  chan struct{} // closed when the writer stopped
	// dropped: the keeper let it go (too slow, taken over), so its
	// closing is no terminal closing.
	mu      sync.Mutex
	dropped bool
}

func newPeer(conn net.Conn) *peer {
	p := &peer{conn: conn, out: make(chan []byte, queueFrames), space: make(chan struct{}, 1), done: make(chan struct{})}
	go p.write()
	return p
}

// write sends the queued frames until the queue closes.
func (p *peer) write() {
	defer close(p.done)
	for b := range p.out {
		select {
		case p.space <- struct{}{}:
		default:
		}
		if _, err := p.conn.Write(b); err != nil {
			p.drop()
			for range p.out {
			}
			return
		}
	}
}

// send queues one frame; with the queue full it waits for the terminal,
// and drops it after stallLimit without progress.
func (p *peer) send(typ byte, payload []byte) {
	b := termframe.Append(make([]byte, 0, termframe.Header+len(payload)), typ, payload)
	var stall *time.Timer
	for {
		p.mu.Lock()
		if p.dropped {
			p.mu.Unlock()
			return
		}
		select {
		case p.out <- b:
			p.mu.Unlock()
			return
		default:
		}
		p.mu.Unlock()
		if stall == nil {
			stall = time.NewTimer(stallLimit)
			defer stall.Stop()
		}
		select {
		case <-p.space:
		case <-p.done: // the writer stopped: the terminal is gone
			return
		case <-stall.C:
			p.drop()
			return
		}
	}
}

// sendChunked queues payload in frames of at most termframe.MaxFrame bytes.
func (p *peer) sendChunked(typ byte, payload []byte) {
	for len(payload) > termframe.MaxFrame {
		p.send(typ, payload[:termframe.MaxFrame])
		payload = payload[termframe.MaxFrame:]
	}
	p.send(typ, payload)
}

// finish queues a last frame, lets the writer send what is queued and
// closes the connection.
func (p *peer) finish(typ byte, payload []byte) {
	p.send(typ, payload)
	p.mu.Lock()
	if !p.dropped {
		p.dropped = true
		close(p.out)
	}
	p.mu.Unlock()
	<-p.done
	_ = p.conn.Close()
}

// drop closes the connection as the keeper's choice.
func (p *peer) drop() {
	p.mu.Lock()
	if !p.dropped {
		p.dropped = true
		close(p.out)
	}
	p.mu.Unlock()
	_ = p.conn.Close()
}

// wasDropped reports whether the keeper let the peer go.
func (p *peer) wasDropped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// checkPeer allows a connection only from the keeper's own user: a
// session's terminal is its user's alone (another user could type into
// the agent's shell or read its screen).
func checkPeer(cred *unix.Ucred, uid int) error {
	if cred == nil {
		return fmt.Errorf("no peer credentials")
	}
	if int(cred.Uid) != uid {
		return fmt.Errorf("connection from uid %d refused: the session belongs to uid %d", cred.Uid, uid)
	}
	return nil
}

// allowed checks conn's peer with checkPeer.
func allowed(conn net.Conn) error {
	cred, err := unixsock.PeerCred(conn)
	if err != nil {
		return err
	}
	return checkPeer(cred, os.Getuid())
}
