package escrelay

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Relay is the sandbox's end of a relay (the daemon's): the session's
// escalation clients' connections, which outlive the links to the host
// (mux.go).
type Relay struct {
	m     *mux
	once  sync.Once
	ended chan struct{}
}

// NewRelay returns a relay end with no link.
func NewRelay() *Relay {
	return &Relay{m: newMux(true), ended: make(chan struct{})}
}

// Add carries a client's connection: opened to the host on the current
// link, or on the next one. Beyond MaxConns, or after End, c is closed.
func (r *Relay) Add(c net.Conn) error {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || len(m.conns) >= MaxConns {
		c.Close()
		return errors.New("escalation relay: too many connections")
	}
	m.next++
	m.add(m.next, c).needOpen = true
	return nil
}

// Link runs one link from a host (rd its frames, w ours), replacing the
// current one: the host's Bundle first, handed to bundle (which writes it
// and makes the socket listen), then Ready and Resume, then the host's
// frames until rd ends (nil), End (nil; Ended is closed) or a malformed
// frame (the error). Later bundles go to bundle too.
func (r *Relay) Link(w io.Writer, rd io.Reader, bundle func([]byte) error) error {
	f, err := Read(rd)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return err
	}
	if f.Type != Bundle {
		return fmt.Errorf("%w: %c before the TLS bundle", ErrFrame, f.Type)
	}
	if err := bundle(f.Payload); err != nil {
		return err
	}
	l, err := r.m.begin(w, func() ([]Frame, error) { return []Frame{{Type: Ready}}, nil })
	if err != nil {
		return err
	}
	return r.m.run(l, rd, func(_ *link, f Frame) error {
		switch f.Type {
		case Bundle:
			return bundle(f.Payload)
		case End:
			r.end()
			return errStale
		}
		return fmt.Errorf("%w: type %c from the host", ErrFrame, f.Type)
	})
}

// end closes every connection and refuses any further link.
func (r *Relay) end() {
	r.once.Do(func() {
		r.m.shutdown()
		close(r.ended)
	})
}

// Close ends the relay as the host's End does (the daemon gives up).
func (r *Relay) Close() { r.end() }

// Ended is closed at the host's End or Close.
func (r *Relay) Ended() <-chan struct{} { return r.ended }
