package escrelay

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Host is the host's end of a relay stream: it writes frames to the
// relay's stdin and, from Run, turns the relay's Open frames into
// connections Accept returns (it is a net.Listener for the escalation
// server).
type Host struct {
	wmu sync.Mutex
	w   io.Writer

	mu     sync.Mutex
	conns  map[uint32]*hostConn
	closed bool

	accept chan net.Conn
	ready  chan struct{}
	once   sync.Once
	dOnce  sync.Once
	done   chan struct{}
}

// writeTimeout bounds handing one Data frame to the server's side of a
// connection: a connection nobody reads is dropped, not waited for.
const writeTimeout = 30 * time.Second

// chunk is the largest Data payload sent.
const chunk = 32 << 10

// NewHost returns the host end writing frames to w (the relay's stdin).
func NewHost(w io.Writer) *Host {
	return &Host{w: w, conns: map[uint32]*hostConn{}, accept: make(chan net.Conn, MaxConns),
		ready: make(chan struct{}), done: make(chan struct{})}
}

// Send writes one frame to the relay.
func (h *Host) Send(f Frame) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	return Write(h.w, f)
}

// Ready is closed when the relay said its socket listens.
func (h *Host) Ready() <-chan struct{} { return h.ready }

// Done is closed when Run returned.
func (h *Host) Done() <-chan struct{} { return h.done }

// Run reads the relay's frames from r until it ends or sends a malformed
// frame, then closes every connection and the listener.
func (h *Host) Run(r io.Reader) error {
	defer h.shutdown()
	for {
		f, err := Read(r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch f.Type {
		case Ready:
			h.once.Do(func() { close(h.ready) })
		case Open:
			h.open(f.ID)
		case Data:
			if c := h.conn(f.ID); c != nil {
				_ = c.local.SetWriteDeadline(time.Now().Add(writeTimeout))
				if _, err := c.local.Write(f.Payload); err != nil {
					h.drop(f.ID, true)
				}
			}
		case Close:
			h.drop(f.ID, false)
		default:
			return ErrFrame // Bundle goes the other way
		}
	}
}

type hostConn struct {
	local net.Conn // ours; the server has the other end
}

func (h *Host) conn(id uint32) *hostConn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[id]
}

// open accepts connection id, or refuses it (a Close back) when the id is
// taken or MaxConns are open.
func (h *Host) open(id uint32) {
	h.mu.Lock()
	_, taken := h.conns[id]
	if taken || h.closed || len(h.conns) >= MaxConns {
		h.mu.Unlock()
		_ = h.Send(Frame{Type: Close, ID: id})
		return
	}
	local, remote := net.Pipe()
	c := &hostConn{local: local}
	h.conns[id] = c
	h.mu.Unlock()
	go h.pump(id, c)
	select { // at most MaxConns are open: blocks only if no one accepts
	case h.accept <- remote:
	case <-h.done:
		_ = remote.Close()
	}
}

// pump sends what the server writes on connection id to the relay, and a
// Close when the server closed it.
func (h *Host) pump(id uint32, c *hostConn) {
	buf := make([]byte, chunk)
	for {
		n, err := c.local.Read(buf)
		if n > 0 {
			if h.Send(Frame{Type: Data, ID: id, Payload: buf[:n]}) != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	h.drop(id, true)
}

// drop forgets connection id and closes our end (the server then sees
// its client hang up); tell sends the relay a Close.
func (h *Host) drop(id uint32, tell bool) {
	h.mu.Lock()
	c, ok := h.conns[id]
	delete(h.conns, id)
	h.mu.Unlock()
	if !ok {
		return
	}
	_ = c.local.Close()
	if tell {
		_ = h.Send(Frame{Type: Close, ID: id})
	}
}

func (h *Host) shutdown() {
	h.mu.Lock()
	h.closed = true
	conns := h.conns
	h.conns = map[uint32]*hostConn{}
	h.mu.Unlock()
	for _, c := range conns {
		_ = c.local.Close()
	}
	h.dOnce.Do(func() { close(h.done) })
}

// Accept implements net.Listener.
func (h *Host) Accept() (net.Conn, error) {
	select {
	case c := <-h.accept:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: it ends Accept (Run ends with the
// stream).
func (h *Host) Close() error {
	h.shutdown()
	return nil
}

// Addr implements net.Listener.
func (h *Host) Addr() net.Addr { return relayAddr{} }

type relayAddr struct{}

func (relayAddr) Network() string { return "escalation-relay" }
func (relayAddr) String() string  { return "escalation-relay" }
