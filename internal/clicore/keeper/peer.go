package keeper

import (
	"fmt"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/unixsock"
)

// queueFrames bounds what waits for an attached terminal: a client that
// falls this far behind is dropped (it may attach again), never the
// session blocked. With reads of readChunk bytes, at most 1 MiB.
const (
	queueFrames = 256
	readChunk   = 4096
)

// peer is one attached terminal's connection.
type peer struct {
	conn net.Conn
	out  chan []byte
	done chan struct{} // closed when the writer stopped
	// dropped: the keeper let it go (too slow, taken over), so its
	// closing is no terminal closing.
	mu      sync.Mutex
	dropped bool
}

func newPeer(conn net.Conn) *peer {
	p := &peer{conn: conn, out: make(chan []byte, queueFrames), done: make(chan struct{})}
	go p.write()
	return p
}

// write sends the queued frames until the queue closes.
func (p *peer) write() {
	defer close(p.done)
	for b := range p.out {
		if _, err := p.conn.Write(b); err != nil {
			p.drop()
			for range p.out {
			}
			return
		}
	}
}

// send queues one frame, or drops the peer when its queue is full.
func (p *peer) send(typ byte, payload []byte) {
	b := make([]byte, 0, frameHeader+len(payload))
	b = append(b, typ, byte(len(payload)>>24), byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload)))
	b = append(b, payload...)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropped {
		return
	}
	select {
	case p.out <- b:
	default:
		p.dropped = true
		close(p.out)
		_ = p.conn.Close()
	}
}

// sendChunked queues payload in frames of at most MaxFrame bytes.
func (p *peer) sendChunked(typ byte, payload []byte) {
	for len(payload) > MaxFrame {
		p.send(typ, payload[:MaxFrame])
		payload = payload[MaxFrame:]
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
