package escrelay

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Host is the host's end of a relay: it is a net.Listener for the
// escalation server, whose connections are the relay's. It outlives the
// links (the relay exec streams) Link runs one at a time: its connections
// wait across them and resume on the next (mux.go).
type Host struct {
	m      *mux
	bundle []byte // under m.mu
	ending bool   // under m.mu

	accept chan net.Conn
	ready  chan struct{}
	once   sync.Once
	done   chan struct{}
}

// endTimeout bounds End's wait for its frame to go out.
const endTimeout = 5 * time.Second

// NewHost returns a host end with no link.
func NewHost() *Host {
	return &Host{m: newMux(false), accept: make(chan net.Conn, MaxConns),
		ready: make(chan struct{}), done: make(chan struct{})}
}

// SetBundle sets the TLS client bundle: sent now on the current link, if
// any, and first on every later link.
func (h *Host) SetBundle(b []byte) error {
	if len(b) > MaxPayload {
		return fmt.Errorf("%w: bundle of %d bytes", ErrFrame, len(b))
	}
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	h.bundle = append([]byte(nil), b...)
	if l := h.m.link; l != nil {
		l.ctrl = append(l.ctrl, Frame{Type: Bundle, Payload: h.bundle})
		h.m.cond.Broadcast()
	}
	return nil
}

// Link runs one link over a relay stream (w its stdin, r its stdout):
// the bundle, Resume, then the relay's frames until r ends (nil) or a
// frame is malformed (the error). The connections survive it. The caller
// closes w once Link returned. A new Link replaces the current one.
func (h *Host) Link(w io.Writer, r io.Reader) error {
	l, err := h.m.begin(w, func() ([]Frame, error) {
		if h.bundle == nil {
			return nil, errors.New("escalation relay: no TLS bundle set")
		}
		return []Frame{{Type: Bundle, Payload: h.bundle}}, nil
	})
	if err != nil {
		return err
	}
	return h.m.run(l, r, h.special)
}

// Linked reports whether a link is up.
func (h *Host) Linked() bool {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return h.m.link != nil
}

// special handles the relay's Ready and Open; the other types go the
// other way.
func (h *Host) special(l *link, f Frame) error {
	switch f.Type {
	case Ready:
		h.once.Do(func() { close(h.ready) })
		return nil
	case Open:
		return h.open(l, f.ID)
	}
	return fmt.Errorf("%w: type %c from the relay", ErrFrame, f.Type)
}

// open accepts connection id, or refuses it (a Close back) when the id is
// taken, MaxConns are open or no one accepts.
func (h *Host) open(l *link, id uint32) error {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.current(l, true); err != nil {
		return err
	}
	_, taken := m.conns[id]
	if taken || m.closed || len(m.conns) >= MaxConns {
		l.ctrl = append(l.ctrl, Frame{Type: Close, ID: id})
		m.cond.Broadcast()
		return nil
	}
	local, remote := net.Pipe()
	select {
	case h.accept <- remote:
	default:
		_, _ = local.Close(), remote.Close()
		l.ctrl = append(l.ctrl, Frame{Type: Close, ID: id})
		m.cond.Broadcast()
		return nil
	}
	m.add(id, local)
	return nil
}

// Ready is closed at the relay's first Ready: its socket listens.
func (h *Host) Ready() <-chan struct{} { return h.ready }

// End ends the session: End to the relay on the current link (best
// effort), then every connection and the listener are closed.
func (h *Host) End() {
	h.m.mu.Lock()
	if h.ending {
		h.m.mu.Unlock()
		<-h.done
		return
	}
	h.ending = true
	var sent, lost <-chan struct{}
	if l := h.m.link; l != nil {
		l.ctrl = append(l.ctrl, Frame{Type: End})
		sent, lost = l.endSent, l.lost
		h.m.cond.Broadcast()
	}
	h.m.mu.Unlock()
	if sent != nil {
		t := time.NewTimer(endTimeout)
		select {
		case <-sent:
		case <-lost:
		case <-t.C:
		}
		t.Stop()
	}
	h.m.shutdown()
	close(h.done)
}

// Accept implements net.Listener.
func (h *Host) Accept() (net.Conn, error) {
	select {
	case <-h.done:
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-h.accept:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: it is End.
func (h *Host) Close() error {
	h.End()
	return nil
}

// Addr implements net.Listener.
func (h *Host) Addr() net.Addr { return relayAddr{} }

type relayAddr struct{}

func (relayAddr) Network() string { return "escalation-relay" }
func (relayAddr) String() string  { return "escalation-relay" }
