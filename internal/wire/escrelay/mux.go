package escrelay

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Links and resumption. Both ends keep their connections across links
// (one exec stream each): a link that ends (a laptop asleep, a network
// gone) loses no connection, and the next link resumes them. At the start
// of every link each side sends Resume: per connection it knows, the bytes
// of it received so far. Each side keeps every byte it sent on a
// connection (its retransmit buffer) and, on the peer's Resume, re-sends
// what the peer did not receive; no Data goes on a link before the peer's
// Resume is in. A connection the peer does not list is unknown to it (a
// new host, a relay restarted, an Open lost with its link): it is closed,
// except on the relay one the host never answered a byte of and whose
// bytes the relay still holds from the first: that one is opened (again)
// on this link, from its first byte. Its client has received nothing, so
// the new host's server starts its TLS handshake afresh, and the old one
// received at most the start of a handshake: nothing runs twice. This
// keeps the connections made while a link was dying but not yet seen
// dead (the common case of a laptop going to sleep).
//
// The buffers are bounded: a connection keeps at most MaxBuffer bytes for
// re-sending. One that sends more while linked becomes non-resumable (it
// keeps only what the link has not taken yet) and is closed when its link
// is lost; one that would pass the bound while unlinked is closed. An
// escalation connection is a request and its answer: far below.

// MaxBuffer bounds a connection's retransmit buffer.
const MaxBuffer = 1 << 20

// errStale: the link was replaced or lost; its frames no longer count.
var errStale = errors.New("escalation relay: stale link")

// mux is the state one end keeps across links.
type mux struct {
	relay bool // the relay's end: connections start here and need an Open

	mu     sync.Mutex
	cond   *sync.Cond // any change of conns or link
	conns  map[uint32]*conn
	link   *link // nil while unlinked
	next   uint32
	closed bool

	// noRetransmit (tests only) ignores the peer's received counts: the
	// control that shows the tests catch a lost byte.
	noRetransmit bool
}

// link is one stream to the peer.
type link struct {
	w       io.Writer
	ctrl    []Frame // sent before any connection's frames
	resumed bool    // the peer's Resume was applied
	lost    chan struct{}
	endSent chan struct{}
}

// conn is one connection. out holds the bytes from offset base on that the
// peer may not have received; sent is how far the current link took them.
type conn struct {
	id    uint32
	local net.Conn
	q     chan []byte // the peer's bytes for local
	qDone bool        // q is closed

	out         []byte
	base, sent  uint64
	recv        uint64
	unresumable bool

	needOpen  bool // relay: an Open goes first on this link
	localDone bool // no more local bytes: a Close follows out
	closeSent bool // this link took our Close
	closeRecv bool
	gone      bool
}

func (c *conn) total() uint64 { return c.base + uint64(len(c.out)) }

// trim forgets the bytes before offset to (base <= to <= total).
func (c *conn) trim(to uint64) {
	c.out = append([]byte(nil), c.out[to-c.base:]...)
	c.base = to
}

func newMux(relay bool) *mux {
	m := &mux{relay: relay, conns: map[uint32]*conn{}}
	m.cond = sync.NewCond(&m.mu)
	return m
}

// queueLen bounds the frames waiting for one local end: one that does not
// read loses its connection.
const queueLen = 256

// writeTimeout bounds handing bytes to a local end.
const writeTimeout = 30 * time.Second

// chunk is the largest Data payload sent.
const chunk = 32 << 10

// add makes connection id over local and starts carrying it (m.mu held).
func (m *mux) add(id uint32, local net.Conn) *conn {
	c := &conn{id: id, local: local, q: make(chan []byte, queueLen)}
	m.conns[id] = c
	go m.readLocal(c)
	go m.writeLocal(c)
	m.cond.Broadcast()
	return c
}

// begin makes a link over w current, replacing any other: first (under
// m.mu) gives the frames before our Resume.
func (m *mux) begin(w io.Writer, first func() ([]Frame, error)) (*link, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, net.ErrClosed
	}
	fs, err := first()
	if err != nil {
		return nil, err
	}
	m.dropLink()
	es := make([]ResumeEntry, 0, len(m.conns))
	for _, c := range m.conns {
		es = append(es, ResumeEntry{ID: c.id, Received: c.recv})
	}
	l := &link{w: w, lost: make(chan struct{}), endSent: make(chan struct{})}
	l.ctrl = append(fs, Frame{Type: Resume, Payload: EncodeResume(es)})
	m.link = l
	go m.writeLoop(l)
	return l, nil
}

// dropLink ends the current link (m.mu held): the connections that cannot
// be resumed are closed.
func (m *mux) dropLink() {
	l := m.link
	if l == nil {
		return
	}
	close(l.lost)
	m.link = nil
	for _, c := range m.conns {
		if c.unresumable {
			m.forget(c)
		}
	}
	m.cond.Broadcast()
}

// lose ends l if it is still current.
func (m *mux) lose(l *link) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.link == l {
		m.dropLink()
	}
}

// shutdown closes every connection and refuses any further link.
func (m *mux) shutdown() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.dropLink()
	for _, c := range m.conns {
		m.forget(c)
	}
}

// forget drops c (m.mu held): its local end gets what was queued, then
// EOF.
func (m *mux) forget(c *conn) {
	c.gone = true
	delete(m.conns, c.id)
	m.stopDelivery(c)
	m.cond.Broadcast()
}

func (m *mux) stopDelivery(c *conn) {
	if !c.qDone {
		c.qDone = true
		close(c.q)
	}
}

// abort closes c on both ends: forgotten here, a Close to the peer.
func (m *mux) abort(l *link, c *conn) {
	m.forget(c)
	l.ctrl = append(l.ctrl, Frame{Type: Close, ID: c.id})
}

// run reads l's frames from r until r ends (nil), l is no longer current
// (nil) or a frame is malformed; special handles the types but Data,
// Close and Resume. The link is lost when run returns; the connections
// stay.
func (m *mux) run(l *link, r io.Reader, special func(*link, Frame) error) error {
	defer m.lose(l)
	for {
		f, err := Read(r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch f.Type {
		case Resume:
			err = m.resume(l, DecodeResume(f.Payload))
		case Data:
			err = m.data(l, f)
		case Close:
			err = m.peerClose(l, f.ID)
		default:
			err = special(l, f)
		}
		if errors.Is(err, errStale) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// current checks l is the current link and, if resumed, that the peer's
// Resume came first (m.mu held).
func (m *mux) current(l *link, resumed bool) error {
	if m.link != l {
		return errStale
	}
	if resumed && !l.resumed {
		return fmt.Errorf("%w: connection frame before resume", ErrFrame)
	}
	return nil
}

// resume applies the peer's Resume: what it did not receive is sent
// again, what it does not know is closed (or, never answered, opened).
func (m *mux) resume(l *link, es []ResumeEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.current(l, false); err != nil {
		return err
	}
	if l.resumed {
		return fmt.Errorf("%w: second resume", ErrFrame)
	}
	l.resumed = true
	peer := make(map[uint32]uint64, len(es))
	for _, e := range es {
		peer[e.ID] = e.Received
	}
	for _, c := range m.conns {
		n, listed := peer[c.id]
		switch {
		case listed:
			m.rewind(l, c, n)
		case m.relay && c.base == 0 && c.recv == 0 && !c.unresumable && !c.closeRecv:
			// Never answered: opened anew, from its first byte.
			c.needOpen, c.sent, c.closeSent = true, 0, false
		default:
			m.forget(c)
		}
	}
	m.cond.Broadcast()
	return nil
}

// rewind makes the link send c from the peer's count n on (m.mu held).
func (m *mux) rewind(l *link, c *conn, n uint64) {
	c.needOpen, c.closeSent = false, false
	switch {
	case m.noRetransmit:
	case c.closeRecv: // the peer closed it: only our Close is due
		c.out, c.base, c.sent = nil, c.total(), c.total()
	case n < c.base || n > c.total(): // bytes we never sent, or ones it had
		m.abort(l, c)
	default:
		c.trim(n)
		c.sent = n
	}
}

// data hands the peer's bytes to the local end.
func (m *mux) data(l *link, f Frame) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.current(l, true); err != nil {
		return err
	}
	c := m.conns[f.ID]
	if c == nil {
		return nil // closed here; the peer hears it
	}
	c.recv += uint64(len(f.Payload))
	if c.qDone || len(f.Payload) == 0 {
		return nil
	}
	select {
	case c.q <- f.Payload:
	default: // a local end that does not read loses its connection
		m.abort(l, c)
	}
	m.cond.Broadcast()
	return nil
}

// peerClose: the peer is done with the connection; ours follows (Close is
// a handshake, so that each side forgets a connection only when the other
// knows it is closed, or will not list it at the next Resume).
func (m *mux) peerClose(l *link, id uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.current(l, true); err != nil {
		return err
	}
	c := m.conns[id]
	if c == nil {
		return nil
	}
	c.closeRecv, c.localDone = true, true
	c.out, c.base = nil, c.sent // the peer reads no more
	m.stopDelivery(c)
	if c.closeSent {
		m.forget(c)
	}
	m.cond.Broadcast()
	return nil
}

// writeLoop sends l's frames until l is no longer current or a write
// fails.
func (m *mux) writeLoop(l *link) {
	for {
		f, ok := m.nextFrame(l)
		if !ok {
			return
		}
		if err := Write(l.w, f); err != nil {
			m.lose(l)
			return
		}
		if f.Type == End {
			close(l.endSent)
		}
	}
}

// nextFrame waits for l's next frame: its control frames, then, once the
// peer's Resume is in, the connections'. What the link takes counts as
// sent; a lost link's bytes are sent again after the next Resume.
func (m *mux) nextFrame(l *link) (Frame, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		if m.link != l {
			return Frame{}, false
		}
		if len(l.ctrl) > 0 {
			f := l.ctrl[0]
			l.ctrl = l.ctrl[1:]
			return f, true
		}
		if l.resumed {
			for _, c := range m.conns {
				if f, ok := m.take(c); ok {
					m.cond.Broadcast()
					return f, true
				}
			}
		}
		m.cond.Wait()
	}
}

// take is c's next frame, if any (m.mu held).
func (m *mux) take(c *conn) (Frame, bool) {
	switch {
	case c.needOpen:
		c.needOpen = false
		return Frame{Type: Open, ID: c.id}, true
	case c.sent < c.total():
		i := c.sent - c.base
		j := min(i+chunk, uint64(len(c.out)))
		p := append([]byte(nil), c.out[i:j]...)
		c.sent += j - i
		if c.unresumable {
			c.trim(c.sent)
		}
		return Frame{Type: Data, ID: c.id, Payload: p}, true
	case c.localDone && !c.closeSent:
		c.closeSent = true
		if c.closeRecv {
			m.forget(c)
		}
		return Frame{Type: Close, ID: c.id}, true
	}
	return Frame{}, false
}

// readLocal buffers what the local end writes, then marks its end.
func (m *mux) readLocal(c *conn) {
	buf := make([]byte, chunk)
	for {
		n, err := c.local.Read(buf)
		if n > 0 && !m.buffer(c, buf[:n]) {
			break
		}
		if err != nil {
			break
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !c.gone {
		c.localDone = true
		m.stopDelivery(c) // a connection ends whole, as before
		m.cond.Broadcast()
	}
}

// buffer appends p to c's buffer. While linked it waits for the link to
// take what passes MaxBuffer; while unlinked it never waits, and a
// connection that would pass the bound is closed.
func (m *mux) buffer(c *conn, p []byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for !c.gone && !c.localDone && m.link != nil && c.total()-c.sent >= MaxBuffer {
		m.cond.Wait()
	}
	if c.gone || c.localDone {
		return false
	}
	if m.link == nil && len(c.out)+len(p) > MaxBuffer {
		m.forget(c)
		return false
	}
	c.out = append(c.out, p...)
	if len(c.out) > MaxBuffer {
		c.unresumable = true
		c.trim(c.sent)
	}
	m.cond.Broadcast()
	return true
}

// writeLocal hands the peer's bytes to the local end, then closes it.
func (m *mux) writeLocal(c *conn) {
	for p := range c.q {
		_ = c.local.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := c.local.Write(p); err != nil {
			break
		}
	}
	_ = c.local.Close()
}
