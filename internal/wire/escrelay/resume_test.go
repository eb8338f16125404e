package escrelay

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// wire is one direction of a link that can be cut like a network: what
// was written and not yet read is lost. hold keeps the reader waiting, so
// that a cut loses frames the writer counts as sent.
type wire struct {
	mu   sync.Mutex
	cond *sync.Cond
	buf  []byte
	cut  bool
	hold bool
}

func newWire() *wire {
	w := &wire{}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *wire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut {
		return 0, io.ErrClosedPipe
	}
	w.buf = append(w.buf, p...)
	w.cond.Broadcast()
	return len(p), nil
}

func (w *wire) Read(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.cut && (w.hold || len(w.buf) == 0) {
		w.cond.Wait()
	}
	if w.cut {
		return 0, io.EOF
	}
	n := copy(p, w.buf)
	w.buf = w.buf[n:]
	return n, nil
}

func (w *wire) sever() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cut, w.buf = true, nil
	w.cond.Broadcast()
}

func (w *wire) setHold(b bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hold = b
	w.cond.Broadcast()
}

func (w *wire) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.buf)
}

// testLink is one link between a Host and a Relay.
type testLink struct {
	up, down *wire // host → relay, relay → host
	done     chan error
}

func connect(h *Host, r *Relay) *testLink {
	l := &testLink{up: newWire(), down: newWire(), done: make(chan error, 2)}
	go func() { l.done <- h.Link(l.up, l.down) }()
	go func() { l.done <- r.Link(l.down, l.up, func([]byte) error { return nil }) }()
	return l
}

// cut severs both ways and waits for both Links to return.
func (l *testLink) cut(t *testing.T) {
	t.Helper()
	l.up.sever()
	l.down.sever()
	for i := 0; i < 2; i++ {
		if err := <-l.done; err != nil {
			t.Fatalf("Link: %v", err)
		}
	}
}

func newEnds(t *testing.T) (*Host, *Relay) {
	t.Helper()
	h := NewHost()
	if err := h.SetBundle([]byte("pem")); err != nil {
		t.Fatal(err)
	}
	r := NewRelay()
	t.Cleanup(func() { h.End(); r.end() })
	return h, r
}

// dial connects a client to r and returns the client's end and the
// server's (accepted from h within 10 s).
func dial(t *testing.T, h *Host, r *Relay) (client, server net.Conn) {
	t.Helper()
	client, relayEnd := net.Pipe()
	if err := r.Add(relayEnd); err != nil {
		t.Fatal(err)
	}
	return client, accept(t, h)
}

func accept(t *testing.T, h *Host) net.Conn {
	t.Helper()
	got := make(chan net.Conn, 1)
	go func() {
		c, err := h.Accept()
		if err == nil {
			got <- c
		}
	}()
	select {
	case c := <-got:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

// pattern is byte i of a stream: a lost or repeated byte shows as soon as
// the next one arrives (no length below is a multiple of 251).
func pattern(from, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((from + i) % 251)
	}
	return b
}

// checker reads a stream's want bytes on r and reports on done.
type checker struct {
	progress atomic.Int64
	done     chan error
}

func startCheck(r net.Conn, want int, timeout time.Duration) *checker {
	c := &checker{done: make(chan error, 1)}
	go func() { c.done <- c.check(r, want, timeout) }()
	return c
}

// check reads want bytes from r within timeout, each what pattern says,
// then makes sure no more come for a moment (a repeat).
func (c *checker) check(r net.Conn, want int, timeout time.Duration) error {
	_ = r.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64<<10)
	for got := 0; got < want; {
		n, err := r.Read(buf[:min(len(buf), want-got)])
		for i, b := range buf[:n] {
			if b != byte((got+i)%251) {
				return fmt.Errorf("byte %d is %d, want %d: bytes lost or repeated", got+i, b, (got+i)%251)
			}
		}
		got += n
		c.progress.Store(int64(got))
		if err != nil {
			return fmt.Errorf("after %d of %d bytes: %w", got, want, err)
		}
	}
	_ = r.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _ := r.Read(buf[:1]); n > 0 {
		return errors.New("bytes beyond the stream: repeated")
	}
	return nil
}

// writer writes a stream's bytes in parts.
type writer struct {
	c       net.Conn
	written int
}

func (w *writer) write(t *testing.T, n int) {
	p := pattern(w.written, n)
	w.written += n
	go func() {
		if _, err := w.c.Write(p); err != nil {
			t.Errorf("write: %v", err)
		}
	}()
}

// waitFor polls cond for 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

const partA, partB, partC = 40000, 30000, 20000

// cutScenario: bytes both ways, then a cut that loses frames already
// written (both wires held with what the links took), a relink of the
// same ends and more bytes. It returns what the two checkers found.
func cutScenario(t *testing.T, noRetransmit bool) (up, down error) {
	h, r := newEnds(t)
	h.m.noRetransmit, r.m.noRetransmit = noRetransmit, noRetransmit
	l := connect(h, r)
	<-h.Ready()
	client, server := dial(t, h, r)
	total := partA + partB + partC
	upc, downc := startCheck(server, total, 30*time.Second), startCheck(client, total, 30*time.Second)
	cw, sw := &writer{c: client}, &writer{c: server}
	cw.write(t, partA)
	sw.write(t, partA)
	waitFor(t, "the first part", func() bool { return upc.progress.Load() == partA && downc.progress.Load() == partA })
	l.up.setHold(true)
	l.down.setHold(true)
	cw.write(t, partB)
	sw.write(t, partB)
	waitFor(t, "the second part on the wires", func() bool { return l.up.pending() >= partB && l.down.pending() >= partB })
	l.cut(t)
	connect(h, r)
	cw.write(t, partC)
	sw.write(t, partC)
	return <-upc.done, <-downc.done
}

// TestResumeAfterCut: every byte arrives once, in order, both ways,
// although the cut lost frames the links had taken.
func TestResumeAfterCut(t *testing.T) {
	if up, down := cutScenario(t, false); up != nil || down != nil {
		t.Fatalf("relay → host: %v; host → relay: %v", up, down)
	}
}

// TestResumeAfterCutControl: the same cut without re-sending loses the
// second part, and the checkers see it both ways.
func TestResumeAfterCutControl(t *testing.T) {
	up, down := cutScenario(t, true)
	if up == nil || down == nil {
		t.Fatalf("without re-sending, a loss went unseen: %v, %v", up, down)
	}
	t.Logf("detected: %v; %v", up, down)
}

// TestResumeRandomCuts: links cut at random points of a transfer both
// ways (frames in flight lost), relinked each time.
func TestResumeRandomCuts(t *testing.T) {
	h, r := newEnds(t)
	l := connect(h, r)
	<-h.Ready()
	client, server := dial(t, h, r)
	const total = 300001
	upc, downc := startCheck(server, total, 15*time.Second), startCheck(client, total, 15*time.Second)
	for _, c := range []net.Conn{client, server} {
		go func() {
			rng := rand.New(rand.NewSource(int64(total)))
			for sent := 0; sent < total; {
				n := min(1+rng.Intn(20000), total-sent)
				if _, err := c.Write(pattern(sent, n)); err != nil {
					t.Errorf("write: %v", err)
					return
				}
				sent += n
			}
		}()
	}
	cuts, done := 0, 0
	for done < 2 {
		select {
		case err := <-upc.done:
			done++
			if err != nil {
				t.Errorf("relay → host: %v", err)
			}
		case err := <-downc.done:
			done++
			if err != nil {
				t.Errorf("host → relay: %v", err)
			}
		case <-time.After(time.Duration(2+rand.Intn(15)) * time.Millisecond):
			if cuts < 40 {
				l.cut(t)
				l = connect(h, r)
				cuts++
			}
		}
	}
	if cuts < 3 {
		t.Fatalf("only %d cuts: the test proved little", cuts)
	}
	t.Logf("%d cuts", cuts)
}

// readAll reads c to its end within 10 s.
func readAll(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v (after %q)", err, b)
	}
	return string(b)
}

// TestNewHost: a host that does not know the relay's connections (a new
// lazaret-kube): the one the old host answered is closed (its client gets
// EOF); the one made while unlinked waits and goes to the new host.
func TestNewHost(t *testing.T) {
	h, r := newEnds(t)
	l := connect(h, r)
	<-h.Ready()
	opened, oldServer := dial(t, h, r)
	go func() { _, _ = oldServer.Write([]byte("hi")) }()
	if got := readN(t, opened, 2); got != "hi" {
		t.Fatalf("client read %q", got)
	}
	l.cut(t)
	waiting, relayEnd := net.Pipe()
	if err := r.Add(relayEnd); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = waiting.Write([]byte("request")) }()
	time.Sleep(50 * time.Millisecond) // it waits in the relay
	h2, _ := newEnds(t)
	connect(h2, r)
	if got := readAll(t, opened); got != "" {
		t.Fatalf("the connection of the old host read %q", got)
	}
	server := accept(t, h2)
	buf := make([]byte, 7)
	_ = server.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "request" {
		t.Fatalf("the new host read %q, %v", buf, err)
	}
	go func() { _, _ = server.Write([]byte("answer")); server.Close() }()
	if got := readAll(t, waiting); got != "answer" {
		t.Fatalf("client read %q", got)
	}
}

// TestHostRelinks: the same host links again while a connection waits
// for its answer (a request on screen): the answer written while unlinked
// arrives after the relink; a connection the relay does not list (a relay
// restarted) is closed on the host.
func TestHostRelinks(t *testing.T) {
	h, r := newEnds(t)
	l := connect(h, r)
	<-h.Ready()
	client, server := dial(t, h, r)
	l.cut(t)
	go func() { _, _ = server.Write([]byte("approved")); server.Close() }()
	connect(h, r)
	if got := readAll(t, client); got != "approved" {
		t.Fatalf("client read %q", got)
	}
	_, server2 := dial(t, h, r)
	connect(h, NewRelay()) // replaces the link; the new relay knows nothing
	if got := readAll(t, server2); got != "" {
		t.Fatalf("server read %q", got)
	}
}

// TestResumeCountBeyondSent: a host claiming more bytes than the relay
// sent on a connection gets it closed (Close, and EOF for the client);
// the count right keeps the other connection carried (the control).
func TestResumeCountBeyondSent(t *testing.T) {
	r := NewRelay()
	defer r.end()
	var clients [2]net.Conn
	for i := range clients {
		c, relayEnd := net.Pipe()
		if err := r.Add(relayEnd); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = c.Write([]byte("hello")) }()
		clients[i] = c
	}
	time.Sleep(50 * time.Millisecond) // both hellos in the relay's buffers
	raw := rawLink(t, r, nil)
	got := map[byte]int{}
	for got[Data] < 2 {
		got[raw.read(t).Type]++
	}
	raw.toHost.Close() // the relay's stdin ends: link lost
	raw = rawLink(t, r, []ResumeEntry{{1, 1000}, {2, 5}})
	if f := raw.read(t); f.Type != Close || f.ID != 1 {
		t.Fatalf("relay sent %+v, want Close 1", f)
	}
	if got := readAll(t, clients[0]); got != "" {
		t.Fatalf("client 1 read %q", got)
	}
	go raw.send(t, Frame{Type: Data, ID: 2, Payload: []byte("still")})
	buf := make([]byte, 5)
	if _, err := io.ReadFull(clients[1], buf); err != nil || string(buf) != "still" {
		t.Fatalf("client 2 read %q, %v", buf, err)
	}
}

// rawLink links r to raw frames (rawRelay with its roles turned: toHost
// is r's input, fromHost its output): a bundle, then a Resume of es; the
// relay's Ready and Resume are read.
func rawLink(t *testing.T, r *Relay, es []ResumeEntry) *rawRelay {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	raw := &rawRelay{toHost: inW, fromHost: outR, linked: make(chan error, 1)}
	go func() { raw.linked <- r.Link(outW, inR, func([]byte) error { return nil }); outW.Close() }()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	go func() {
		raw.send(t, Frame{Type: Bundle, Payload: []byte("pem")})
		raw.send(t, Frame{Type: Resume, Payload: EncodeResume(es)})
	}()
	if f := raw.read(t); f.Type != Ready {
		t.Fatalf("%+v, want Ready", f)
	}
	if f := raw.read(t); f.Type != Resume {
		t.Fatalf("%+v, want Resume", f)
	}
	return raw
}

// TestUnresumable: a connection that sent more than MaxBuffer while
// linked is closed when the link is lost; a small one (the control)
// survives the same cut.
func TestUnresumable(t *testing.T) {
	h, r := newEnds(t)
	l := connect(h, r)
	<-h.Ready()
	big, bigServer := dial(t, h, r)
	small, smallServer := dial(t, h, r)
	c := startCheck(bigServer, MaxBuffer+partA, 20*time.Second)
	(&writer{c: big}).write(t, MaxBuffer+partA)
	if err := <-c.done; err != nil {
		t.Fatal(err)
	}
	l.cut(t)
	connect(h, r)
	if got := readAll(t, bigServer); got != "" {
		t.Fatalf("the big connection's server read %q after the cut", got)
	}
	if got := readAll(t, big); got != "" {
		t.Fatalf("the big connection's client read %q after the cut", got)
	}
	go func() { _, _ = small.Write([]byte("small")); small.Close() }()
	if got := readAll(t, smallServer); got != "small" {
		t.Fatalf("the small connection carried %q", got)
	}
}

// TestUnlinkedBound: while unlinked a client's bytes wait, up to
// MaxBuffer: beyond, its connection is closed.
func TestUnlinkedBound(t *testing.T) {
	r := NewRelay()
	defer r.end()
	c, relayEnd := net.Pipe()
	if err := r.Add(relayEnd); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(make([]byte, MaxBuffer)); err != nil {
		t.Fatalf("MaxBuffer bytes while unlinked: %v", err)
	}
	go func() { _, _ = c.Write(make([]byte, 1)) }()
	if got := readAll(t, c); got != "" {
		t.Fatalf("client read %q", got)
	}
	if _, err := c.Write(make([]byte, 1)); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("a byte more: %v, want the connection closed", err)
	}
}

// TestEnd: End reaches the relay: its connections close, Ended is closed
// and no further link is taken.
func TestEnd(t *testing.T) {
	h, r := newEnds(t)
	l := connect(h, r)
	<-h.Ready()
	client, _ := dial(t, h, r)
	h.End()
	select {
	case <-r.Ended():
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not end")
	}
	if got := readAll(t, client); got != "" {
		t.Fatalf("client read %q", got)
	}
	l.cut(t)
	if err := r.Link(io.Discard, eofReader{}, nil); err != nil {
		t.Fatalf("Link of an empty stream: %v", err)
	}
	c, relayEnd := net.Pipe()
	if err := r.Add(relayEnd); err == nil {
		t.Fatal("a connection added after End")
	}
	c.Close()
}

func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read: %v (%q)", err, b)
	}
	return string(b)
}

// TestOpenLostWithLink: a connection made while a link was dying (its
// Open and bytes taken by the link, lost with it) is opened again on the
// next link, from its first byte, since the host never answered it.
func TestOpenLostWithLink(t *testing.T) {
	h, r := newEnds(t)
	l := connect(h, r)
	<-h.Ready()
	l.down.setHold(true)
	client, relayEnd := net.Pipe()
	if err := r.Add(relayEnd); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = client.Write([]byte("hello")) }()
	waitFor(t, "the Open and the bytes on the dying link", func() bool { return l.down.pending() >= 2*headerLen+5 })
	l.cut(t)
	connect(h, r)
	server := accept(t, h)
	if got := readN(t, server, 5); got != "hello" {
		t.Fatalf("host read %q", got)
	}
	go func() { _, _ = server.Write([]byte("answer")); server.Close() }()
	if got := readAll(t, client); got != "answer" {
		t.Fatalf("client read %q", got)
	}
}
